"""A league's schedule: an endless, reproducible stream of matches among its entrants.

Match ``k`` of a league is a pure function of ``(entrants, tasks, seed, k)``: its task (in turn),
its holdout world (a seed drawn for it), and which entrant sits in which seat. A cross-play match
seats as many distinct entrants as the world has labs (at most all of them), drawn so that every
pairing comes up, in shuffled seats; the world's archetypes fill seats left over. Every fifth
match is a self-play match: one entrant in every seat, the entrants in turn. A run plays the next
``N`` matches of the stream, so a second run adds matches and never repeats one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..core.worldgen import generate_world, world_seed

SELF_PLAY_EVERY = 5  # match k is self-play when k % SELF_PLAY_EVERY == SELF_PLAY_EVERY - 1
SPLIT = "holdout"  # leagues rate on worlds no policy trained on


@dataclass(frozen=True, slots=True)
class LeagueMatch:
    """One scheduled match: ``seats`` maps each lab to the entrant in it (labs not named play the
    world's archetypes); ``self_play`` when one entrant holds every seat."""

    index: int
    task: str
    split: str
    seed: int
    seats: tuple[tuple[str, str], ...]
    self_play: bool

    @property
    def entrants(self) -> list[str]:
        return sorted({e for _lab, e in self.seats})


def league_key(entrants: list[str], tasks: list[str], seed: int) -> str:
    """The league a run adds to: the same entrants (in any order), tasks and seed."""
    return f"{seed}|{','.join(sorted(entrants))}|{','.join(tasks)}"


def scheduled(entrants: list[str], tasks: list[str], seed: int, index: int) -> LeagueMatch:
    """Match ``index`` of the league ``(entrants, tasks, seed)``."""
    if len(set(entrants)) != len(entrants) or len(entrants) < 2:
        raise ValueError("a league needs at least two distinct entrants")
    task = tasks[index % len(tasks)]
    rng = random.Random(world_seed(f"league:{','.join(sorted(entrants))}:{index}", SPLIT, seed))
    world = rng.randrange(2**31)
    labs = list(generate_world(task, SPLIT, world).labs)
    if index % SELF_PLAY_EVERY == SELF_PLAY_EVERY - 1:
        who = sorted(entrants)[(index // SELF_PLAY_EVERY) % len(entrants)]
        return LeagueMatch(index, task, SPLIT, world, tuple((lab, who) for lab in labs), True)
    chosen = rng.sample(sorted(entrants), min(len(entrants), len(labs)))
    seats = rng.sample(labs, len(chosen))
    return LeagueMatch(index, task, SPLIT, world, tuple(sorted(zip(seats, chosen, strict=True))), False)

