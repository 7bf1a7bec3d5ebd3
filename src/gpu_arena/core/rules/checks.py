"""Field checks shared by the action handlers: amounts, id lists, strings, expiries, conditions, and
the ownership and state of the labs, jobs, blocks and offers an action names. Each raises
:class:`ActionError` before anything changes.
"""

from __future__ import annotations

import math
from typing import Any

from ..serialize import json_standard
from ..types import (
    CONDITION_KEYS,
    Block,
    BlockStatus,
    CoalitionStatus,
    Job,
    JobStatus,
    Offer,
    OfferStatus,
    World,
)
from .limits import MAX_CONDITIONS, MAX_LIST, MAX_MESSAGE_CHARS, MAX_PAYMENT
from .outcome import ActionError


def finite_amount(value: Any, name: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ActionError("invalid_type", f"{name} must be a number, got {type(value).__name__}")
    try:
        v = float(value)
    except OverflowError:
        raise ActionError("invalid_payment", f"{name} is too large") from None
    if not math.isfinite(v):
        raise ActionError("invalid_payment", f"{name} must be finite, got {value!r}")
    if v < 0:
        raise ActionError("invalid_payment", f"{name} must not be negative (use requested_payment to ask for money)")
    if v > MAX_PAYMENT:
        raise ActionError("invalid_payment", f"{name} exceeds the cap {MAX_PAYMENT:g}")
    return v


def id_list(value: Any, name: str, *, required: bool = False) -> tuple[str, ...]:
    if value is None:
        value = ()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ActionError("invalid_type", f"{name} must be a list of ids")
    if len(value) > MAX_LIST:
        raise ActionError("list_too_long", f"{name} has {len(value)} entries; at most {MAX_LIST}")
    if any(not isinstance(x, str) for x in value):
        raise ActionError("invalid_type", f"{name} must contain only string ids")
    if len(set(value)) != len(value):
        raise ActionError("duplicate_ids", f"{name} contains duplicated ids")
    if required and not value:
        raise ActionError("empty_list", f"{name} must name at least one id")
    return tuple(value)


def optional_str(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ActionError("invalid_type", f"{name} must be a string")
    return value


def message_text(value: Any) -> str:
    text = optional_str(value, "message") or ""
    if len(text) > MAX_MESSAGE_CHARS:
        raise ActionError("message_too_long", f"message has {len(text)} characters; at most {MAX_MESSAGE_CHARS}")
    if not json_standard(text):
        # a lone surrogate (possible in a Python str, never in UTF-8) would be stored in the world
        # and then break every JSON rendering of the views that show it
        raise ActionError("invalid_text", "message must be Unicode text (it holds a lone surrogate)")
    return text


def ttl_rounds(value: Any, default: int, cap: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActionError("invalid_type", "expires_in must be an integer number of rounds")
    if not 1 <= value <= cap:
        raise ActionError("invalid_expiry", f"expires_in must be between 1 and {cap}")
    return value


def offer_conditions(value: Any) -> dict[str, bool]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ActionError("invalid_type", "conditions must be an object")
    if len(value) > MAX_CONDITIONS:
        raise ActionError("conditions_too_large", f"at most {MAX_CONDITIONS} conditions")
    out: dict[str, bool] = {}
    for k, v in value.items():
        if k not in CONDITION_KEYS:
            raise ActionError("unknown_condition", f"unknown condition {k!r}; known: {', '.join(CONDITION_KEYS)}")
        if not isinstance(v, bool):
            raise ActionError("invalid_type", f"condition {k!r} must be true or false")
        if v:
            out[k] = True
    return out


def target_lab(world: World, lab_id: Any, actor: str, *, what: str = "target_lab_id") -> str:
    lid = optional_str(lab_id, what)
    if lid is None:
        raise ActionError("missing_field", f"{what} is required")
    if lid not in world.labs:
        raise ActionError("unknown_lab", f"no lab {lid!r}")
    if lid == actor:
        raise ActionError("self_trade", "a lab cannot trade or pitch against itself")
    return lid


def own_job(world: World, job_id: Any, actor: str, *, required: bool = True) -> Job | None:
    jid = optional_str(job_id, "job_id")
    if jid is None:
        if required:
            raise ActionError("missing_field", "job_id is required")
        return None
    job = world.jobs.get(jid)
    if job is None or job.owner != actor:
        raise ActionError("unknown_job", f"you have no job {jid!r}")
    if job.status != JobStatus.OPEN:
        raise ActionError("job_closed", f"job {jid} has already settled ({job.status})")
    return job


def block_named(world: World, block_id: str) -> Block:
    b = world.blocks.get(block_id)
    if b is None:
        raise ActionError("unknown_block", f"no block {block_id!r}")
    return b


def check_tradeable(world: World, b: Block, owner: str, *, allow_reserved: bool = False) -> None:
    if b.owner != owner:
        raise ActionError("block_not_owned", f"block {b.block_id} is not owned by {owner}")
    if b.status == BlockStatus.FAILED:
        raise ActionError("block_failed", f"block {b.block_id} has failed")
    if b.start_round <= world.round_index:
        raise ActionError("block_started", f"block {b.block_id}'s window has started (round {b.start_round})")
    if b.status == BlockStatus.RESERVED and not allow_reserved:
        raise ActionError("block_reserved", f"block {b.block_id} is reserved; release it first")
    if b.status == BlockStatus.COMMITTED:
        raise ActionError("block_committed", f"block {b.block_id} is committed to coalition {b.coalition_id}")
    if b.status not in (BlockStatus.FREE, BlockStatus.RESERVED):
        raise ActionError("block_not_tradeable", f"block {b.block_id} is {b.status}")


def check_unconditioned(b: Block) -> None:
    """A block bought under no_resale or must_allocate_to_job stays with its buyer, whichever side
    of a new offer names it."""
    if b.no_resale:
        raise ActionError("no_resale", f"block {b.block_id} was bought with a no-resale condition")
    if b.must_allocate:
        raise ActionError("no_resale", f"block {b.block_id} was bought on condition that it runs for its buyer's job")


def check_fits(b: Block, job: Job) -> None:
    if b.end_round > job.deadline_round:
        raise ActionError("block_too_late",
                          f"block {b.block_id} ends at round {b.end_round}, after job {job.job_id}'s deadline")
    if b.reliability < job.min_reliability:
        raise ActionError("block_unreliable",
                          f"block {b.block_id} reliability {b.reliability} is below job {job.job_id}'s floor")


def open_offer(world: World, offer_id: Any) -> Offer:
    oid = optional_str(offer_id, "offer_id")
    if oid is None:
        raise ActionError("missing_field", "offer_id is required")
    offer = world.offers.get(oid)
    if offer is None:
        raise ActionError("unknown_offer", f"no offer {oid!r}")
    return offer


def require_open(world: World, offer: Offer) -> None:
    if offer.status != OfferStatus.OPEN or world.round_index >= offer.expires_round:
        state = offer.status if offer.status != OfferStatus.OPEN else OfferStatus.EXPIRED
        raise ActionError("offer_not_open", f"offer {offer.offer_id} is {state}")


def in_common_coalition(world: World, a: str, b: str) -> bool:
    return any(c.status == CoalitionStatus.FORMED and a in c.members and b in c.members for c in world.coalitions.values())


def coalition_peers(world: World, lab_id: str) -> set[str]:
    peers: set[str] = set()
    for c in world.coalitions.values():
        if c.status == CoalitionStatus.FORMED and lab_id in c.members:
            peers.update(c.members)
    return peers
