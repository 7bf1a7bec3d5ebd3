"""Plain-dict (JSON-ready) forms of core objects: the god view of a world and action coercion."""

from __future__ import annotations

import math
from dataclasses import asdict, fields
from typing import Any

from .types import Action, RejectedAction, World

_ACTION_FIELDS = {f.name for f in fields(Action)}
_TUPLE_FIELDS = ("block_ids", "requested_block_ids", "member_lab_ids")


def json_standard(value: Any) -> bool:
    """Whether JSON as every reader takes it carries ``value`` (an action's field, a record, a message): no NaN or
    infinity (Python writes them; SQLite's JSON functions and strict parsers refuse them) and no
    lone surrogate (no UTF-8 for it)."""
    if isinstance(value, str):
        if value.isascii():
            return True
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(json_standard(k) and json_standard(v) for k, v in value.items())
    if isinstance(value, list):
        return all(json_standard(v) for v in value)
    return True


def world_to_dict(world: World) -> dict[str, Any]:
    """Everything in the world, private values included: for orchestration and replays only."""
    return {
        "task": world.task, "split": world.split, "seed": world.seed, "judge_mode": world.judge_mode,
        "round_index": world.round_index, "max_rounds": world.max_rounds, "done": world.done,
        "labs": [{k: v for k, v in asdict(lab).items() if k != "last_signature"}
                 for lab in world.labs.values()],
        "blocks": [asdict(b) | {"gpu_hours": b.hours, "end_round": b.end_round} for b in world.blocks.values()],
        "jobs": [asdict(j) for j in world.jobs.values()],
        "offers": [asdict(o) for o in world.offers.values()],
        "coalitions": [asdict(c) | {"consented": sorted(c.consented)} for c in world.coalitions.values()],
        "auctions": [asdict(a) for a in world.auctions.values()],
        "events": [asdict(e) for e in world.events],
        "messages": [asdict(m) for m in world.messages],
        "shocks_fired": [asdict(s) for s in world.shock_schedule if s.round_index <= world.round_index],
        "reward_scale": dict(world.reward_scale),
        "initial_potential": dict(world.initial_potential),
    }


def coerce_action(obj: Any) -> Action | RejectedAction:
    """Turn a core Action, a dict, or any object with the action attributes (a pydantic ArenaAction)
    into a core Action; anything unreadable becomes a RejectedAction with a stable code."""
    if isinstance(obj, Action):
        return obj
    if obj is None:
        return RejectedAction("malformed_action", "no action given")
    if isinstance(obj, dict):
        data = obj
    else:
        data = {name: getattr(obj, name) for name in _ACTION_FIELDS if hasattr(obj, name)}
        if "action_type" not in data:
            return RejectedAction("malformed_action", f"cannot read an action from {type(obj).__name__}")
    unknown = set(data) - _ACTION_FIELDS - {"metadata"}
    if unknown:
        return RejectedAction("unknown_field", f"unknown action fields: {', '.join(sorted(map(str, unknown)))}")
    if "action_type" not in data:
        return RejectedAction("malformed_action", "action_type is required")
    kwargs: dict[str, Any] = {}
    for name in _ACTION_FIELDS:
        if name not in data:
            continue
        value = data[name]
        if name in _TUPLE_FIELDS:
            if value is None:
                value = ()
            elif isinstance(value, list | tuple):
                value = tuple(value)
            else:
                return RejectedAction("invalid_type", f"{name} must be a list of ids")
        kwargs[name] = value
    return Action(**kwargs)
