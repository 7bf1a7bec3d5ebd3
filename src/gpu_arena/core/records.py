"""A move as a round reads and records it.

Its transcript record (:func:`action_record`, :func:`action_to_dict`, :func:`standard_record`) and
the way back for replays (:func:`action_from_record`), and what it reaches (:func:`referenced_ids`,
:func:`budget_token`): a refusal with one of :data:`CONFLICT_CODES` that reaches what an earlier
move of the same round changed is a conflict, not a mistake. The episode
(:class:`gpu_arena.core.engine.Episode`) reads them every round; the Rust engine's ``engine.rs``
mirrors them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from .serialize import json_standard
from .types import Action, ActionResult, RejectedAction, World

# errors another seat's earlier move in the same round can cause (the block sold, the offer taken)
CONFLICT_CODES = frozenset({
    "block_not_owned", "block_not_tradeable", "block_reserved", "block_committed", "block_used",
    "offer_not_open", "offer_stale", "coalition_not_open", "coalition_exists", "lab_finished",
    "pitch_too_low", "no_contested_resource", "already_pitched", "condition_unmet", "counterparty_cannot_pay",
})


def referenced_ids(world: World, lab_id: str, action: Action) -> set[str]:
    """Every block, offer and coalition an action names or reaches through what it names.

    An action that applies a whole plan (``finish``, ``allocate_to_job`` without arguments)
    references all of the lab's blocks.
    """
    ids: set[str] = set()
    for name in ("block_ids", "requested_block_ids"):
        value = getattr(action, name)
        if isinstance(value, tuple | list):
            ids.update(x for x in value if isinstance(x, str))
    for name in ("offer_id", "coalition_id"):
        value = getattr(action, name)
        if isinstance(value, str):
            ids.add(value)
    offer = world.offers.get(action.offer_id) if isinstance(action.offer_id, str) else None
    if offer is not None:
        ids.update(offer.block_ids)
        ids.update(offer.requested_block_ids)
    coalition = world.coalitions.get(action.coalition_id) if isinstance(action.coalition_id, str) else None
    if coalition is not None:
        for blocks in coalition.commitments.values():
            ids.update(blocks)
    if action.action_type == "finish" or (action.action_type == "allocate_to_job" and not action.job_id
                                          and not action.block_ids):
        ids.update(b.block_id for b in world.blocks.values() if b.owner == lab_id)
    if action.action_type in ("make_pitch", "counter_pitch"):
        ids.update(a.auction_id for a in world.auctions.values())
    if action.action_type in ("send_offer", "counter_offer") and action.requested_payment:
        # asking another lab for money reaches its budget, which earlier moves may have spent
        payer = action.target_lab_id
        if offer is not None:
            payer = offer.sender if offer.target == lab_id else offer.target
        if isinstance(payer, str):
            ids.add(budget_token(payer))
    if action.action_type == "accept_offer" and offer is not None and offer.payment > 0:
        # taking an offer reaches the sender's budget too: an earlier move this round may have spent it
        ids.add(budget_token(offer.sender))
    return ids


def budget_token(lab_id: str) -> str:
    """The id under which a change of a lab's budget is tracked between the moves of a round."""
    return f"budget:{lab_id}"


def action_from_record(record: Mapping[str, Any]) -> Action | RejectedAction:
    """Inverse of a transcript's action entry (see :func:`action_to_dict`), for replays."""
    if "rejected" in record:
        return RejectedAction(str(record["rejected"]), str(record.get("message", "")))
    from .serialize import coerce_action

    return coerce_action(dict(record))


_ACTION_FIELDS = tuple(f.name for f in fields(Action))
assert _ACTION_FIELDS[0] == "action_type"


def action_to_dict(action: Action) -> dict[str, Any]:
    """The non-default fields of an action, JSON-ready (for transcripts and replays); ``TypeError``
    where a field holds what no field takes (see :func:`action_record`)."""
    record = action_record(action)
    if isinstance(record, RejectedAction):
        raise TypeError(record.message)
    return record


_PLAIN = frozenset({type(None), str, int, float, bool})
_SCALARS = (str, int, float, bool)


def _flat(value: Any) -> bool:
    """Whether a list's entries, or a mapping's keys and values, are all strings, numbers,
    true/false or None (subclasses included)."""
    plain = _PLAIN.issuperset
    if isinstance(value, dict):
        if plain(map(type, value)) and plain(map(type, value.values())):
            return True
        items: Any = [*value, *value.values()]
    else:
        if plain(map(type, value)):
            return True
        items = value
    return all(x is None or isinstance(x, _SCALARS) for x in items)


def action_record(action: Action) -> dict[str, Any] | RejectedAction:
    """The non-default fields of an action, JSON-ready (its transcript record), or a
    :class:`RejectedAction` (``invalid_type``) where a field holds anything but a string, a number,
    true/false, None, or a list or mapping of those.

    The rules check each field's type and range; this keeps out what a round reads before they do.
    An array's ``==`` and truth are not bools, so it would raise half-way through a round in which
    others have moved; a nested container would sit in the transcript where no JSON encoder
    reaches its end. Emptiness is read by kind, never by ``==``."""
    kind = action.action_type
    if type(kind) not in _PLAIN and not (isinstance(kind, _SCALARS) or (isinstance(kind, tuple) and _flat(kind))):
        return RejectedAction("invalid_type", f"action_type must be a string, not {type(kind).__name__}")
    out: dict[str, Any] = {"action_type": list(kind) if isinstance(kind, tuple) else kind}
    plain = _PLAIN.issuperset
    for name in _ACTION_FIELDS[1:]:  # action_type comes first, and is always kept
        v = getattr(action, name)
        if v is None:
            continue
        t = type(v)
        if t is tuple:  # the list fields' own kind (an empty one is the default)
            if v:
                if not (plain(map(type, v)) or _flat(v)):
                    return RejectedAction("invalid_type", f"{name} must hold strings, numbers or true/false only")
                out[name] = list(v)
        elif t in _PLAIN:
            out[name] = v
        elif isinstance(v, tuple | list | dict):
            if not v:
                if isinstance(v, list):  # an empty tuple or mapping is a default; an empty list is kept
                    out[name] = v
                continue
            if not _flat(v):
                return RejectedAction("invalid_type", f"{name} must hold strings, numbers or true/false only")
            out[name] = list(v) if isinstance(v, tuple) else v
        elif isinstance(v, _SCALARS):
            out[name] = v
        else:
            return RejectedAction("invalid_type", f"{name} must be a string, a number, true/false or a list, "
                                                  f"not {t.__name__}")
    return out


def standard_record(record: dict[str, Any], result: ActionResult, overtaken: bool) -> dict[str, Any]:
    """``record`` as the transcript keeps it, given what the round made of it: where a field holds
    what standard JSON cannot carry (see :func:`~gpu_arena.core.serialize.json_standard`), a move
    the rules refused is recorded as refused (its code and message: a replay refuses it the same
    way) and a move they took, or found ``overtaken`` by an earlier one, keeps the rest (they never
    read such a field: each rule refuses it where it reads it)."""
    odd = [k for k, v in record.items() if not json_standard(v)]
    if not odd:
        return record
    if not result.ok and not overtaken:
        return {"rejected": result.code, "message": message_text(result.message)}
    return {k: v for k, v in record.items() if k not in odd}


def message_text(message: str) -> str:
    """A refusal's message as every reader can carry it (it may echo what the seat sent): a lone
    surrogate written as its escape."""
    return message if json_standard(message) else message.encode("utf-8", "backslashreplace").decode("utf-8")


__all__ = ["CONFLICT_CODES", "action_from_record", "action_record", "action_to_dict", "budget_token", "message_text",
           "referenced_ids", "standard_record"]
