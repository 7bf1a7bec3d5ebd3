"""Plain states of the Python core's objects, in the shapes the Rust engine writes them, and the
episodes whose states the comparisons run over."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from gpu_arena.core.engine import Episode
from gpu_arena.core.policy import policy_move
from gpu_arena.core.types import World
from gpu_arena.policies import make_seat_policy


def canon(value: Any) -> Any:
    """``value`` with every float written exactly (its hex) and ints and bools told apart, so that
    comparing two canonical forms compares bits and types, not just ``==``."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, dict):
        return ("dict", [(canon(k), canon(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return ("seq", [canon(v) for v in value])
    raise TypeError(f"no canonical form for {type(value).__name__}")


def world_state(world: World) -> dict[str, Any]:
    """Every field of a world as plain data (the Rust engine's ``world_state``); the task
    parameters are left out: nothing changes them."""
    def lab(x: Any) -> dict[str, Any]:
        d = asdict(x)
        sig = x.last_signature
        d["last_signature"] = None if sig is None else [list(p) for p in sig]
        return d

    def coalition(c: Any) -> dict[str, Any]:
        d = asdict(c)
        d["members"] = list(c.members)
        d["commitments"] = {k: list(v) for k, v in c.commitments.items()}
        d["consented"] = sorted(c.consented)
        return d

    def offer(o: Any) -> dict[str, Any]:
        d = asdict(o)
        d["block_ids"], d["requested_block_ids"] = list(o.block_ids), list(o.requested_block_ids)
        return d

    return {
        "task": world.task, "split": world.split, "seed": world.seed, "max_rounds": world.max_rounds,
        "rng": world.rng.getstate(),
        "labs": {k: lab(v) for k, v in world.labs.items()},
        "blocks": {k: asdict(v) for k, v in world.blocks.items()},
        "jobs": {k: asdict(v) for k, v in world.jobs.items()},
        "shock_schedule": [(s.round_index, s.kind, s.magnitude) for s in world.shock_schedule],
        "round_index": world.round_index,
        "offers": {k: offer(v) for k, v in world.offers.items()},
        "coalitions": {k: coalition(v) for k, v in world.coalitions.items()},
        "auctions": {k: asdict(v) for k, v in world.auctions.items()},
        "messages": [(m.round_index, m.sender, m.target, m.text) for m in world.messages],
        "events": [(e.round_index, e.kind, e.text, dict(e.data)) for e in world.events],
        "done": world.done, "next_id": world.next_id,
        "initial_potential": dict(world.initial_potential), "reward_scale": dict(world.reward_scale),
        "judge_mode": world.judge_mode, "version": world.version,
    }


# seat policies that between them make offers, counter them, pool, pitch and misbehave
MIXES: tuple[tuple[str, ...], ...] = (
    ("random_valid", "archetypes", "archetypes", "archetypes", "archetypes"),
    ("rule_expert", "archetypes", "random_valid", "archetypes", "rule_expert"),
    ("archetypes", "rule_expert", "archetypes", "random_valid", "archetypes"),
)


def episode_worlds(task: str, seed: int, mix: int = 0, judge_mode: str = "none") -> Iterator[tuple[Episode, dict[str, Any]]]:
    """An episode of ``task`` played to its end by the seat policies of ``MIXES[mix]``: before
    each round it yields the episode and the moves its seats are about to make."""
    episode = Episode.new(task, "train", seed, controlled=(), judge_mode=judge_mode)
    world = episode.world
    names = MIXES[mix % len(MIXES)]
    policies = {lid: make_seat_policy(world, lid, names[i % len(names)]) for i, lid in enumerate(world.labs)}
    while not episode.done:
        moves = {lid: policy_move(p, episode, lid) for lid, p in policies.items()}
        yield episode, moves
        episode.step(moves)
    yield episode, {}


def py_apply(world: World, lab_id: str, action: Any) -> tuple[Any, dict[str, Any]]:
    """The Python rules' answer to ``action`` on a copy of ``world``, in the shape of the Rust
    engine's ``rules_apply``: ``(True, (category, sorted affected, note, breaches))`` or
    ``(False, (code, message))``, and the copy's state after it."""
    from gpu_arena.core.rules import ActionError, apply_action

    w = copy.deepcopy(world)
    try:
        out = apply_action(w, lab_id, action)
    except ActionError as e:
        return (False, (e.code, e.message)), world_state(w)
    return (True, (out.category, sorted(out.affected), out.note, out.breaches)), world_state(w)


def py_tick(world: World) -> tuple[list[Any], dict[str, Any]]:
    """The Python clock's round change on a copy of ``world`` (``Episode._tick`` without the
    ledger, the rule judge alone), in the shape of the Rust engine's ``clock_tick``: what each
    stage returned, then the copy's state."""
    from gpu_arena.core.rules import expire, final_settlement, resolve_auctions, settle_due_jobs, start_blocks
    from gpu_arena.core.shocks import fire_due_shocks

    w = copy.deepcopy(world)
    w.round_index += 1
    affected, lapsed, breaches = start_blocks(w)
    stages: list[Any] = [sorted(affected), dict(sorted(lapsed.items())), dict(sorted(breaches.items()))]
    expire(w)
    stages.append(sorted(resolve_auctions(w, judge=None, records={})))
    stages.append(sorted(settle_due_jobs(w)))
    stages.append(sorted(fire_due_shocks(w)))
    if w.round_index >= w.max_rounds:
        stages.append(sorted(final_settlement(w, judge=None, records={})))
    return stages, world_state(w)
