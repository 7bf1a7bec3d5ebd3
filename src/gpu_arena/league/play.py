"""Playing one league match: every seat driven by its policy on its own view, each seat's result.

A match is played by the Python core: every seat is driven from outside (each an entrant's policy,
or a world's archetype asked in Python), and the Rust engine plays one driven seat with its other
seats in Rust (``NativeEpisode``). The record says so (``engine``, ``engine_reason``: the reasons of
:mod:`gpu_arena.native.report`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..core.allocation import solve
from ..core.engine import Episode
from ..core.policy import Policy, policy_move
from ..native.report import EVERY_SEAT_DRIVEN, PYTHON
from ..policies import DEFAULT_OPPONENTS, make_seat_policy
from .schedule import LeagueMatch


@dataclass(frozen=True, slots=True)
class SeatResult:
    """One seat of a played match: who held it (an entrant, or ``archetypes``) and how it did."""

    lab: str
    entrant: str
    surplus: float  # Φ at the end − Φ at reset: the gain over its BATNA (the rating's ranking key)
    episode_return: float
    deals: int
    invalid_actions: int


def left_on_table(joint: dict[str, Any]) -> float:
    """How much more net value the two labs' pooled blocks would reach on their pooled jobs (with
    their budgets pooled) than their two plans do: 0 for a deal that left both labs on the Pareto
    frontier of reallocating what they hold."""
    blocks = tuple(tuple(k) for k in joint["blocks"])
    jobs = tuple(tuple(k) for k in joint["jobs"])
    if not jobs:
        return 0.0
    value, energy, _choices = solve(blocks, jobs, max(0.0, float(joint["budget"])))
    return max(0.0, value - energy - float(joint["net"]))


def play_match(match: LeagueMatch) -> dict[str, Any]:
    """Play ``match`` to the end and return its record: the match's fields and one :class:`SeatResult`
    (as a dict) per lab, in lab order. A policy that raises on a view is that seat's invalid move."""
    episode = Episode.new(match.task, match.split, match.seed, controlled=())
    world = episode.world
    names = dict(match.seats)
    policies: dict[str, Policy] = {lab: make_seat_policy(world, lab, names.get(lab, DEFAULT_OPPONENTS))
                                   for lab in world.labs}
    while not episode.done:  # a broken entrant loses its move, not the league (policy_move)
        episode.step({lab: policy_move(policy, episode, lab) for lab, policy in policies.items()})
    seats = [asdict(SeatResult(lab, names.get(lab, DEFAULT_OPPONENTS),
                               episode.potential(lab) - world.initial_potential[lab], episode.returns[lab],
                               lab_state.deals, lab_state.invalid_actions))
             for lab, lab_state in world.labs.items()]
    # every settled deal: its two labs, what it did to each one's potential when it settled, and
    # the joint gain it left on the table (the best allocation of both labs' blocks to both labs'
    # jobs, against their two plans right after it)
    deals = [{"round": e.round_index, "labs": list(e.data["labs"]), "gains": list(e.data["gains"]),
              "left_on_table": left_on_table(e.data["joint"]) if "joint" in e.data else None}
             for e in world.events if e.kind == "deal" and "gains" in e.data]
    return {"index": match.index, "task": match.task, "split": match.split, "seed": match.seed,
            "self_play": match.self_play, "seats": seats, "rounds": world.round_index, "deals": deals,
            "transcript": episode.transcript, "engine": PYTHON, "engine_reason": EVERY_SEAT_DRIVEN}
