"""The rules: validate and apply one seat's action, and advance the clock.

Every handler validates completely before it mutates anything, so an invalid action raises
:class:`ActionError` and leaves the world exactly as it was (no partial transfer, no status flip).
Each applied action returns the set of labs whose potential it may have changed, so the reward
ledger recomputes only those.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .types import (
    ACTION_TYPES,
    CONDITION_KEYS,
    Action,
    Auction,
    Block,
    BlockStatus,
    Coalition,
    Event,
    Job,
    Message,
    Offer,
    Pitch,
    World,
)
from .valuation import best_allocation, block_fits, job_value, potential, valid_hours

if TYPE_CHECKING:
    from .judge import PitchJudge

MAX_MESSAGE_CHARS = 500
MAX_LIST = 16
MAX_CONDITIONS = len(CONDITION_KEYS)
MAX_OPEN_OFFERS = 6
MAX_OPEN_PROPOSALS = 3
MAX_PAYMENT = 1e7
# rounds a target has to answer, counted from the round after the offer is made
OFFER_TTL_DEFAULT, OFFER_TTL_MAX = 2, 5
COALITION_TTL_DEFAULT, COALITION_TTL_MAX = 3, 6

REP_BREACH = -0.15
REP_INVALID = -0.01
REP_SPAM = -0.02
REP_FAIR_DEAL = 0.02
REP_HONOURED = 0.03

# Which reward column an action's potential change belongs to: (value part, money part).
CATEGORY_COLUMNS: dict[str, tuple[str, str]] = {
    "deal": ("deal_quality_score", "deal_quality_score"),
    "allocation": ("job_utility_score", "budget_efficiency_score"),
    "coalition": ("coalition_reliability_score", "coalition_reliability_score"),
    "judge": ("judge_argument_score", "judge_argument_score"),
    "time": ("negotiation_efficiency_score", "negotiation_efficiency_score"),
    "shock": ("market_adaptation_score", "market_adaptation_score"),
}


class ActionError(Exception):
    """A rejected action: ``code`` is stable and machine-readable, ``message`` is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Outcome:
    """What an applied action did: its column category, affected labs, breaches, a note."""

    __slots__ = ("affected", "breaches", "category", "note")

    def __init__(self, category: str = "none", affected: Iterable[str] = (), note: str = "",
                 breaches: int = 0) -> None:
        self.category = category
        self.affected = set(affected)
        self.note = note
        self.breaches = breaches


# ----------------------------------------------------------------------------- field checks

def _finite_amount(value: Any, name: str) -> float:
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


def _id_list(value: Any, name: str, *, required: bool = False) -> tuple[str, ...]:
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


def _opt_str(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ActionError("invalid_type", f"{name} must be a string")
    return value


def _message(value: Any) -> str:
    text = _opt_str(value, "message") or ""
    if len(text) > MAX_MESSAGE_CHARS:
        raise ActionError("message_too_long", f"message has {len(text)} characters; at most {MAX_MESSAGE_CHARS}")
    return text


def _ttl(value: Any, default: int, cap: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActionError("invalid_type", "expires_in must be an integer number of rounds")
    if not 1 <= value <= cap:
        raise ActionError("invalid_expiry", f"expires_in must be between 1 and {cap}")
    return value


def _conditions(value: Any) -> dict[str, bool]:
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


def _lab(world: World, lab_id: Any, actor: str, *, what: str = "target_lab_id") -> str:
    lid = _opt_str(lab_id, what)
    if lid is None:
        raise ActionError("missing_field", f"{what} is required")
    if lid not in world.labs:
        raise ActionError("unknown_lab", f"no lab {lid!r}")
    if lid == actor:
        raise ActionError("self_trade", "a lab cannot trade or pitch against itself")
    return lid


def _own_job(world: World, job_id: Any, actor: str, *, required: bool = True) -> Job | None:
    jid = _opt_str(job_id, "job_id")
    if jid is None:
        if required:
            raise ActionError("missing_field", "job_id is required")
        return None
    job = world.jobs.get(jid)
    if job is None or job.owner != actor:
        raise ActionError("unknown_job", f"you have no job {jid!r}")
    if job.status != "open":
        raise ActionError("job_closed", f"job {jid} has already settled ({job.status})")
    return job


def _block(world: World, block_id: str) -> Block:
    b = world.blocks.get(block_id)
    if b is None:
        raise ActionError("unknown_block", f"no block {block_id!r}")
    return b


def _check_tradeable(world: World, b: Block, owner: str, *, allow_reserved: bool = False) -> None:
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


def _check_unconditioned(b: Block) -> None:
    """A block bought under no_resale or must_allocate_to_job stays with its buyer, whichever side
    of a new offer names it."""
    if b.no_resale:
        raise ActionError("no_resale", f"block {b.block_id} was bought with a no-resale condition")
    if b.must_allocate:
        raise ActionError("no_resale", f"block {b.block_id} was bought on condition that it runs for its buyer's job")


def _check_fits(b: Block, job: Job) -> None:
    if b.end_round > job.deadline_round:
        raise ActionError("block_too_late",
                          f"block {b.block_id} ends at round {b.end_round}, after job {job.job_id}'s deadline")
    if b.reliability < job.min_reliability:
        raise ActionError("block_unreliable",
                          f"block {b.block_id} reliability {b.reliability} is below job {job.job_id}'s floor")


def _open_offer(world: World, offer_id: Any) -> Offer:
    oid = _opt_str(offer_id, "offer_id")
    if oid is None:
        raise ActionError("missing_field", "offer_id is required")
    offer = world.offers.get(oid)
    if offer is None:
        raise ActionError("unknown_offer", f"no offer {oid!r}")
    return offer


def _require_open(world: World, offer: Offer) -> None:
    if offer.status != "open" or world.round_index >= offer.expires_round:
        state = offer.status if offer.status != "open" else "expired"
        raise ActionError("offer_not_open", f"offer {offer.offer_id} is {state}")


def in_common_coalition(world: World, a: str, b: str) -> bool:
    return any(c.status == "formed" and a in c.members and b in c.members for c in world.coalitions.values())


# ----------------------------------------------------------------------------- action handlers

def apply_action(world: World, lab_id: str, action: Action) -> Outcome:
    """Validate and apply ``action`` for ``lab_id``. Raises ActionError and changes nothing if invalid."""
    if world.done:
        raise ActionError("episode_done", "the episode is over")
    if not isinstance(action.action_type, str) or action.action_type not in ACTION_TYPES:
        raise ActionError("unknown_action_type",
                          f"unknown action_type {action.action_type!r}; expected one of {', '.join(ACTION_TYPES)}")
    lab = world.labs[lab_id]
    if lab.finished and action.action_type != "wait":
        raise ActionError("seat_finished", f"{lab_id} has finished; it can only wait")
    handler = _HANDLERS[action.action_type]
    return handler(world, lab_id, action)


def _offer_terms(world: World, sender: str, target: str, action: Action) -> dict[str, Any]:
    blocks = _id_list(action.block_ids, "block_ids")
    requested = _id_list(action.requested_block_ids, "requested_block_ids")
    payment = _finite_amount(action.payment, "payment")
    requested_payment = _finite_amount(action.requested_payment, "requested_payment")
    if payment > 0 and requested_payment > 0:
        raise ActionError("invalid_payment", "set payment or requested_payment, not both")
    if not blocks and not requested and payment == 0 and requested_payment == 0:
        raise ActionError("empty_offer", "an offer must give or ask for blocks or money")
    if set(blocks) & set(requested):
        raise ActionError("duplicate_ids", "a block cannot be both offered and requested")
    for bid in blocks:
        b = _block(world, bid)
        _check_tradeable(world, b, sender)
        _check_unconditioned(b)
    for bid in requested:
        b = _block(world, bid)
        if b.owner != target:
            raise ActionError("block_not_owned", f"block {bid} is not owned by {target}")
        _check_tradeable(world, b, target)
        _check_unconditioned(b)
    lab = world.labs[sender]
    if payment > lab.budget + 1e-9:
        raise ActionError("insufficient_budget", f"payment {payment:.2f} exceeds your budget {lab.budget:.2f}")
    if requested_payment > world.labs[target].budget + 1e-9:
        raise ActionError("counterparty_cannot_pay", f"{target} cannot pay {requested_payment:.2f}")
    job = _own_job(world, action.job_id, sender, required=False)
    return dict(blocks=blocks, requested=requested, payment=payment, requested_payment=requested_payment,
                conditions=_conditions(action.conditions), message=_message(action.message),
                ttl=_ttl(action.expires_in, OFFER_TTL_DEFAULT, OFFER_TTL_MAX),
                job_id=job.job_id if job else None)


def _create_offer(world: World, sender: str, target: str, terms: dict[str, Any], parent: str | None) -> Offer:
    open_count = sum(1 for o in world.offers.values()
                     if o.sender == sender and o.status == "open" and world.round_index < o.expires_round)
    if open_count >= MAX_OPEN_OFFERS:
        raise ActionError("too_many_offers", f"at most {MAX_OPEN_OFFERS} open offers per lab")
    if world.labs[target].finished:
        raise ActionError("lab_finished", f"{target} has finished and takes no offers")
    offer = Offer(offer_id=world.new_id("o"), sender=sender, target=target, block_ids=terms["blocks"],
                  requested_block_ids=terms["requested"], payment=terms["payment"],
                  # the target first sees the offer next round: it may answer in the next ``ttl`` rounds
                  created_round=world.round_index, expires_round=world.round_index + 1 + terms["ttl"],
                  conditions=terms["conditions"], message=terms["message"], parent_offer_id=parent,
                  requested_payment=terms["requested_payment"], job_id=terms["job_id"])
    world.offers[offer.offer_id] = offer
    world.labs[sender].offers_made += 1
    world.labs[target].offers_received += 1
    if terms["message"]:
        world.messages.append(Message(world.round_index, sender, target, terms["message"]))
    return offer


def _send_offer(world: World, lab_id: str, action: Action) -> Outcome:
    target = _lab(world, action.target_lab_id, lab_id)
    terms = _offer_terms(world, lab_id, target, action)
    offer = _create_offer(world, lab_id, target, terms, None)
    return Outcome(note=f"offer {offer.offer_id} sent to {target}")


def _counter_offer(world: World, lab_id: str, action: Action) -> Outcome:
    original = _open_offer(world, action.offer_id)
    if original.target != lab_id:
        raise ActionError("offer_not_addressed", f"offer {original.offer_id} is not addressed to you")
    _require_open(world, original)
    terms = _offer_terms(world, lab_id, original.sender, action)
    offer = _create_offer(world, lab_id, original.sender, terms, original.offer_id)
    original.status = "countered"
    return Outcome(note=f"counter-offer {offer.offer_id} sent to {original.sender}")


def _reject_offer(world: World, lab_id: str, action: Action) -> Outcome:
    offer = _open_offer(world, action.offer_id)
    if lab_id not in (offer.target, offer.sender):
        raise ActionError("offer_not_addressed", f"offer {offer.offer_id} is not yours")
    _require_open(world, offer)
    offer.status = "rejected" if offer.target == lab_id else "withdrawn"
    return Outcome(note=f"offer {offer.offer_id} {offer.status}")


def _allocate_now(world: World, owner: str, job: Job | None, block_ids: Iterable[str]) -> list[str]:
    """Allocate received blocks to ``job`` where they fit and the owner can pay the energy."""
    done: list[str] = []
    if job is None or job.status != "open" or job.owner != owner:
        return done
    lab = world.labs[owner]
    for bid in block_ids:
        b = world.blocks[bid]
        energy = b.energy_cost * b.hours
        if block_fits(b, job) and b.start_round > world.round_index and energy <= lab.budget:
            lab.budget -= energy
            lab.energy_paid += energy
            b.energy_paid = energy
            b.status, b.job_id, b.reserved_for = BlockStatus.ALLOCATED, job.job_id, None
            done.append(bid)
    return done


def _accept_offer(world: World, lab_id: str, action: Action) -> Outcome:
    offer = _open_offer(world, action.offer_id)
    if offer.target != lab_id:
        raise ActionError("offer_not_addressed", f"offer {offer.offer_id} is not addressed to you")
    _require_open(world, offer)
    sender, target = world.labs[offer.sender], world.labs[lab_id]
    if sender.finished:
        raise ActionError("offer_not_open", f"{offer.sender} has finished; its offers are void")
    for bid in offer.block_ids:
        b = _block(world, bid)
        try:
            _check_tradeable(world, b, offer.sender)
            _check_unconditioned(b)
        except ActionError as e:
            raise ActionError("offer_stale", f"offer can no longer settle: {e.message}") from None
    for bid in offer.requested_block_ids:
        b = _block(world, bid)
        _check_tradeable(world, b, lab_id)
        _check_unconditioned(b)
    requested_payment = offer.requested_payment
    if offer.payment > sender.budget + 1e-9:
        raise ActionError("offer_stale", f"{offer.sender} can no longer pay {offer.payment:.2f}")
    if requested_payment > target.budget + 1e-9:
        raise ActionError("insufficient_budget", f"you cannot pay {requested_payment:.2f}")
    if offer.conditions.get("coalition_only") and not in_common_coalition(world, offer.sender, lab_id):
        raise ActionError("condition_unmet", "coalition_only: you share no formed coalition with the sender")
    my_job = _own_job(world, action.job_id, lab_id, required=False)
    before = (potential(world, offer.sender), potential(world, lab_id))
    # settle atomically: every check above has passed
    for bid in offer.block_ids:
        b = world.blocks[bid]
        b.owner, b.status, b.reserved_for = lab_id, BlockStatus.FREE, None
        b.no_resale = bool(offer.conditions.get("no_resale"))
        b.must_allocate = bool(offer.conditions.get("must_allocate_to_job"))
    for bid in offer.requested_block_ids:
        b = world.blocks[bid]
        b.owner, b.status, b.reserved_for = offer.sender, BlockStatus.FREE, None
        b.no_resale = b.must_allocate = False
    sender.budget -= offer.payment
    target.budget += offer.payment
    target.budget -= requested_payment
    sender.budget += requested_payment
    offer.status, offer.settled_round = "accepted", world.round_index
    sender.deals += 1
    target.deals += 1
    sender_job = world.jobs.get(offer.job_id) if offer.job_id else None
    auto = _allocate_now(world, offer.sender, sender_job, offer.requested_block_ids)
    auto += _allocate_now(world, lab_id, my_job, offer.block_ids)
    moved = set(offer.block_ids) | set(offer.requested_block_ids)
    for other in world.offers.values():
        if other.status == "open" and moved & (set(other.block_ids) | set(other.requested_block_ids)):
            other.status = "superseded"
    after = (potential(world, offer.sender), potential(world, lab_id))
    if after[0] >= before[0] - 1e-9 and after[1] >= before[1] - 1e-9:
        for lab in (sender, target):
            lab.reputation = min(1.0, lab.reputation + REP_FAIR_DEAL)
    world.events.append(Event(world.round_index, "deal", f"{offer.sender} and {lab_id} settled offer {offer.offer_id}",
                              {"offer_id": offer.offer_id, "labs": [offer.sender, lab_id],
                               "blocks": sorted(moved)}))
    note = f"offer {offer.offer_id} settled" + (f"; allocated {', '.join(auto)}" if auto else "")
    affected = {offer.sender, lab_id} | _coalition_peers(world, offer.sender) | _coalition_peers(world, lab_id)
    return Outcome("deal", affected, note)


def _coalition_peers(world: World, lab_id: str) -> set[str]:
    peers: set[str] = set()
    for c in world.coalitions.values():
        if c.status == "formed" and lab_id in c.members:
            peers.update(c.members)
    return peers


def _open_auction(world: World) -> Auction:
    for a in world.auctions.values():
        if a.status == "open" and world.round_index < a.close_round:
            return a
    raise ActionError("no_contested_resource", "no contested resource is open for pitches")


def _make_pitch(world: World, lab_id: str, action: Action) -> Outcome:
    auction = _open_auction(world)
    if lab_id in auction.pitches:
        raise ActionError("already_pitched", "you have pitched; use counter_pitch to answer or raise")
    bid = _finite_amount(action.payment, "payment")
    if bid > world.labs[lab_id].budget + 1e-9:
        raise ActionError("insufficient_budget", f"bid {bid:.2f} exceeds your budget")
    job = _own_job(world, action.job_id, lab_id, required=False)
    text = _message(action.message)
    auction.pitches[lab_id] = Pitch(lab_id, bid, job.job_id if job else None, text, world.round_index)
    world.messages.append(Message(world.round_index, lab_id, None, f"[pitch {bid:.2f}] {text}".strip()))
    return Outcome(note=f"pitched {bid:.2f} for {auction.block_id}")


def _counter_pitch(world: World, lab_id: str, action: Action) -> Outcome:
    auction = _open_auction(world)
    target = _lab(world, action.target_lab_id, lab_id)
    rival = auction.pitches.get(target)
    if rival is None:
        raise ActionError("no_pitch_to_counter", f"{target} has not pitched")
    bid = _finite_amount(action.payment, "payment")
    if bid <= rival.bid:
        raise ActionError("pitch_too_low", f"a counter-pitch must bid above {target}'s {rival.bid:.2f}")
    if bid > world.labs[lab_id].budget + 1e-9:
        raise ActionError("insufficient_budget", f"bid {bid:.2f} exceeds your budget")
    job = _own_job(world, action.job_id, lab_id, required=False)
    text = _message(action.message)
    auction.pitches[lab_id] = Pitch(lab_id, bid, job.job_id if job else None, text, world.round_index, target)
    world.messages.append(Message(world.round_index, lab_id, None, f"[counter-pitch {bid:.2f} vs {target}] {text}".strip()))
    return Outcome(note=f"counter-pitched {bid:.2f} against {target}")


def _reserve(world: World, lab_id: str, action: Action) -> Outcome:
    blocks = _id_list(action.block_ids, "block_ids", required=True)
    job = _own_job(world, action.job_id, lab_id)
    assert job is not None
    for bid in blocks:
        b = _block(world, bid)
        _check_tradeable(world, b, lab_id)
        _check_fits(b, job)
    for bid in blocks:
        b = world.blocks[bid]
        b.status, b.reserved_for = BlockStatus.RESERVED, job.job_id
    return Outcome("allocation", {lab_id}, f"reserved {', '.join(blocks)} for {job.job_id}")


def _release(world: World, lab_id: str, action: Action) -> Outcome:
    blocks = _id_list(action.block_ids, "block_ids", required=True)
    for bid in blocks:
        b = _block(world, bid)
        if b.owner != lab_id:
            raise ActionError("block_not_owned", f"block {bid} is not yours")
        if b.start_round <= world.round_index:
            raise ActionError("block_started", f"block {bid}'s window has started")
        if b.status not in (BlockStatus.RESERVED, BlockStatus.ALLOCATED, BlockStatus.COMMITTED):
            raise ActionError("block_not_releasable", f"block {bid} is {b.status}: nothing to release")
    affected = {lab_id}
    breaches = 0
    category = "allocation"
    lab = world.labs[lab_id]
    for bid in blocks:
        b = world.blocks[bid]
        pooled = world.jobs[b.job_id].coalition_id if b.job_id else None
        if pooled is not None:
            affected.update(world.coalitions[pooled].members)  # their shares lose these hours
        if b.status in (BlockStatus.ALLOCATED, BlockStatus.COMMITTED):
            lab.budget += b.energy_paid  # energy is paid only for blocks that run
            lab.energy_paid -= b.energy_paid
            b.energy_paid = 0.0
        if b.status == BlockStatus.COMMITTED and b.coalition_id is not None:
            coalition = world.coalitions[b.coalition_id]
            coalition.breaches.append(lab_id)
            affected.update(coalition.members)
            lab.breaches += 1
            lab.reputation = max(0.0, lab.reputation + REP_BREACH)
            breaches += 1
            category = "coalition"
            world.events.append(Event(world.round_index, "breach",
                                      f"{lab_id} withdrew block {bid} from coalition {coalition.coalition_id}",
                                      {"lab": lab_id, "coalition_id": coalition.coalition_id, "block_id": bid}))
        b.status, b.job_id, b.reserved_for, b.coalition_id = BlockStatus.FREE, None, None, None
    return Outcome(category, affected, f"released {', '.join(blocks)}", breaches)


def _shares(value: Any, members: tuple[str, ...]) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ActionError("invalid_shares", "shares must map every member (and you) to a fraction")
    if set(value) != set(members):
        raise ActionError("invalid_shares", f"shares must cover exactly {', '.join(sorted(members))}")
    out: dict[str, float] = {}
    for k, v in value.items():
        try:
            ok = not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(float(v)) and v >= 0
        except OverflowError:
            ok = False
        if not ok:
            raise ActionError("invalid_shares", f"share for {k} must be a finite non-negative number")
        out[k] = float(v)
    if abs(sum(out.values()) - 1.0) > 1e-6:
        raise ActionError("invalid_shares", "shares must sum to 1")
    return out


def _form_coalition(world: World, lab_id: str, action: Action) -> Outcome:
    job = _own_job(world, action.job_id, lab_id)
    assert job is not None
    if not job.pooled:
        raise ActionError("job_not_poolable", f"job {job.job_id} is not a pooled job")
    if any(c.job_id == job.job_id and c.status == "formed" for c in world.coalitions.values()):
        raise ActionError("coalition_exists", f"job {job.job_id} already has a formed coalition")
    members = _id_list(action.member_lab_ids, "member_lab_ids", required=True)
    for m in members:
        _lab(world, m, lab_id, what="member_lab_ids")
        if world.labs[m].finished:
            raise ActionError("lab_finished", f"{m} has finished")
    own = _id_list(action.block_ids, "block_ids")
    requested = _id_list(action.requested_block_ids, "requested_block_ids", required=True)
    if set(own) & set(requested):
        raise ActionError("duplicate_ids", "a block cannot be listed twice")
    commitments: dict[str, list[str]] = {m: [] for m in (lab_id, *members)}
    for bid in own:
        b = _block(world, bid)
        _check_tradeable(world, b, lab_id)
        _check_fits(b, job)
        commitments[lab_id].append(bid)
    for bid in requested:
        b = _block(world, bid)
        if b.owner not in members:
            raise ActionError("block_not_owned", f"block {bid} is not owned by a member")
        _check_tradeable(world, b, b.owner)
        _check_fits(b, job)
        commitments[b.owner].append(bid)
    for m in members:
        if not commitments[m]:
            raise ActionError("member_without_blocks", f"{m} is asked to commit no block")
    shares = _shares(action.shares, (lab_id, *members))
    payment = _finite_amount(action.payment, "payment")
    if payment > world.labs[lab_id].budget + 1e-9:
        raise ActionError("insufficient_budget", f"payment {payment:.2f} exceeds your budget")
    ttl = _ttl(action.expires_in, COALITION_TTL_DEFAULT, COALITION_TTL_MAX)
    text = _message(action.message)
    open_props = sum(1 for c in world.coalitions.values() if c.proposer == lab_id and c.status == "proposed")
    if open_props >= MAX_OPEN_PROPOSALS:
        raise ActionError("too_many_proposals", f"at most {MAX_OPEN_PROPOSALS} open coalition proposals")
    c = Coalition(coalition_id=world.new_id("c"), proposer=lab_id, members=(lab_id, *members), job_id=job.job_id,
                  commitments={k: tuple(v) for k, v in commitments.items()}, payment=payment, shares=shares,
                  created_round=world.round_index, expires_round=world.round_index + 1 + ttl, consented={lab_id})
    world.coalitions[c.coalition_id] = c
    if text:
        for m in members:
            world.messages.append(Message(world.round_index, lab_id, m, text))
    return Outcome(note=f"coalition {c.coalition_id} proposed to {', '.join(members)}")


def _commit(world: World, lab_id: str, action: Action) -> Outcome:
    cid = _opt_str(action.coalition_id, "coalition_id")
    if cid is None:
        raise ActionError("missing_field", "coalition_id is required")
    c = world.coalitions.get(cid)
    if c is None:
        raise ActionError("unknown_coalition", f"no coalition {cid!r}")
    if lab_id not in c.members:
        raise ActionError("not_a_member", f"you are not a member of {cid}")
    if c.status != "proposed" or world.round_index >= c.expires_round:
        raise ActionError("coalition_not_open", f"coalition {cid} is {c.status if c.status != 'proposed' else 'expired'}")
    if lab_id in c.consented:
        raise ActionError("already_committed", f"you have already committed to {cid}")
    job = world.jobs[c.job_id]
    mine = c.commitments.get(lab_id, ())
    for bid in mine:
        b = _block(world, bid)
        _check_tradeable(world, b, lab_id)
        _check_fits(b, job)
    energy = sum(world.blocks[b].energy_cost * world.blocks[b].hours for b in mine)
    if energy > world.labs[lab_id].budget + 1e-9:
        raise ActionError("insufficient_budget", f"you cannot pay the energy ({energy:.2f}) of your committed blocks")
    c.consented.add(lab_id)
    if set(c.members) != c.consented:
        return Outcome(note=f"committed to {cid}; waiting for {', '.join(m for m in c.members if m not in c.consented)}")
    problem = _formation_problem(world, c)
    if problem:
        c.status = "failed"
        world.events.append(Event(world.round_index, "coalition_failed", f"coalition {cid} could not form: {problem}",
                                  {"coalition_id": cid}))
        return Outcome(note=f"coalition {cid} could not form: {problem}")
    _form(world, c)
    return Outcome("coalition", set(c.members), f"coalition {cid} formed")


def _formation_problem(world: World, c: Coalition) -> str:
    job = world.jobs[c.job_id]
    if job.status != "open":
        return "the pooled job has settled"
    if any(o.status == "formed" and o.job_id == c.job_id for o in world.coalitions.values()):
        return "the job already has a coalition"
    for m, blocks in c.commitments.items():
        energy = 0.0
        for bid in blocks:
            b = world.blocks[bid]
            try:
                _check_tradeable(world, b, m)
                _check_fits(b, job)
            except ActionError as e:
                return e.message
            energy += b.energy_cost * b.hours
        if energy > world.labs[m].budget + 1e-9 - (c.payment if m == c.proposer else 0.0):
            return f"{m} cannot pay its energy"
    if c.payment > world.labs[c.proposer].budget + 1e-9:
        return f"{c.proposer} cannot pay {c.payment:.2f}"
    return ""


def _form(world: World, c: Coalition) -> None:
    job = world.jobs[c.job_id]
    others = [m for m in c.members if m != c.proposer]
    hours = {m: sum(world.blocks[b].hours for b in c.commitments[m]) for m in others}
    total_hours = sum(hours.values())
    proposer = world.labs[c.proposer]
    proposer.budget -= c.payment
    for m in others:
        world.labs[m].budget += c.payment * (hours[m] / total_hours if total_hours else 1.0 / len(others))
    for m, blocks in c.commitments.items():
        lab = world.labs[m]
        lab.commitments += len(blocks)
        for bid in blocks:
            b = world.blocks[bid]
            energy = b.energy_cost * b.hours
            lab.budget -= energy
            lab.energy_paid += energy
            b.energy_paid = energy
            b.status, b.job_id, b.coalition_id, b.reserved_for = BlockStatus.COMMITTED, job.job_id, c.coalition_id, None
    job.coalition_id = c.coalition_id
    c.status = "formed"
    committed = {b for bl in c.commitments.values() for b in bl}
    for o in world.offers.values():
        if o.status == "open" and committed & (set(o.block_ids) | set(o.requested_block_ids)):
            o.status = "superseded"
    world.events.append(Event(world.round_index, "coalition_formed",
                              f"coalition {c.coalition_id} formed by {', '.join(c.members)}",
                              {"coalition_id": c.coalition_id, "members": list(c.members)}))


def _allocate(world: World, lab_id: str, action: Action) -> Outcome:
    if action.job_id is None and not action.block_ids:
        # no job and no blocks: apply the seat's whole best plan in one action
        done = auto_allocate(world, lab_id)
        return Outcome("allocation", {lab_id} | _coalition_peers(world, lab_id),
                       f"allocated {', '.join(done)} by your best plan" if done else "nothing to allocate")
    if action.job_id is None:
        # blocks but no job: allocate those blocks where the seat's best plan puts them
        blocks = _id_list(action.block_ids, "block_ids", required=True)
        for bid in blocks:
            b = _block(world, bid)
            _check_tradeable(world, b, lab_id, allow_reserved=True)
        done = auto_allocate(world, lab_id, only=set(blocks))
        idle = [bid for bid in blocks if bid not in done]
        note = f"allocated {', '.join(done) or 'nothing'} by your best plan"
        if idle:
            note += f"; your best plan has no job for {', '.join(idle)}"
        return Outcome("allocation", {lab_id} | _coalition_peers(world, lab_id), note)
    job = _own_job(world, action.job_id, lab_id)
    assert job is not None
    blocks = _id_list(action.block_ids, "block_ids", required=True)
    energy = 0.0
    for bid in blocks:
        b = _block(world, bid)
        if b.status == BlockStatus.RESERVED and b.reserved_for != job.job_id:
            raise ActionError("block_reserved", f"block {bid} is reserved for {b.reserved_for}")
        if b.status in (BlockStatus.ALLOCATED, BlockStatus.RUNNING, BlockStatus.DONE):
            raise ActionError("block_used", f"block {bid} is already allocated to {b.job_id}")
        _check_tradeable(world, b, lab_id, allow_reserved=True)
        _check_fits(b, job)
        energy += b.energy_cost * b.hours
    lab = world.labs[lab_id]
    if energy > lab.budget + 1e-9:
        raise ActionError("insufficient_budget", f"energy {energy:.2f} exceeds your budget {lab.budget:.2f}")
    _allocate_now(world, lab_id, job, blocks)
    affected = {lab_id} | (_coalition_peers(world, lab_id) if job.coalition_id else set())
    return Outcome("allocation", affected, f"allocated {', '.join(blocks)} to {job.job_id}")


def _send_message(world: World, lab_id: str, action: Action) -> Outcome:
    target = None
    if action.target_lab_id is not None:
        target = _lab(world, action.target_lab_id, lab_id)
    text = _message(action.message)
    if not text.strip():
        raise ActionError("empty_message", "message is empty")
    world.messages.append(Message(world.round_index, lab_id, target, text))
    return Outcome(note="message sent")


def _wait(world: World, lab_id: str, action: Action) -> Outcome:
    return Outcome(note="waited")


def _finish(world: World, lab_id: str, action: Action) -> Outcome:
    """Finish negotiating: the server allocates the lab's blocks optimally; nothing is forfeited."""
    allocated = auto_allocate(world, lab_id)
    lab = world.labs[lab_id]
    lab.finished = True
    for o in world.offers.values():
        if o.status == "open" and o.sender == lab_id:
            o.status = "withdrawn"
    for c in world.coalitions.values():
        if c.status == "proposed" and c.proposer == lab_id:
            c.status = "expired"
    note = "finished" + (f"; allocated {', '.join(allocated)}" if allocated else "")
    return Outcome("allocation", {lab_id} | _coalition_peers(world, lab_id), note)


def auto_allocate(world: World, lab_id: str, only: set[str] | None = None) -> list[str]:
    """Allocate the lab's plannable blocks (or just ``only``) by its best plan (finish, final
    settlement, and ``allocate_to_job`` without a job)."""
    plan = best_allocation(world, lab_id)
    by_job: dict[str, list[str]] = {}
    for bid, jid in plan.assignment.items():
        if only is None or bid in only:
            by_job.setdefault(jid, []).append(bid)
    done: list[str] = []
    for jid, bids in by_job.items():
        for bid in bids:
            b = world.blocks[bid]
            if b.status == BlockStatus.RESERVED:
                b.status = BlockStatus.FREE
        done += _allocate_now(world, lab_id, world.jobs[jid], bids)
    return done


_HANDLERS = {
    "send_offer": _send_offer,
    "accept_offer": _accept_offer,
    "reject_offer": _reject_offer,
    "counter_offer": _counter_offer,
    "make_pitch": _make_pitch,
    "counter_pitch": _counter_pitch,
    "reserve_capacity": _reserve,
    "release_capacity": _release,
    "form_coalition": _form_coalition,
    "commit_to_coalition": _commit,
    "allocate_to_job": _allocate,
    "send_message": _send_message,
    "wait": _wait,
    "finish": _finish,
}
assert set(_HANDLERS) == set(ACTION_TYPES)


# ----------------------------------------------------------------------------- the clock

def _settleable(world: World, offer: Offer) -> bool:
    for owner, ids in ((offer.sender, offer.block_ids), (offer.target, offer.requested_block_ids)):
        for bid in ids:
            b = world.blocks[bid]
            if b.owner != owner or b.start_round <= world.round_index or b.status not in (
                    BlockStatus.FREE, BlockStatus.RESERVED):
                return False
    return True


def expire(world: World) -> None:
    """Close offers and coalition proposals past their expiry, and those that can no longer settle
    (a block started, failed, moved or got committed): no seat is shown a deal it cannot take."""
    r = world.round_index
    for o in world.offers.values():
        if o.status != "open":
            continue
        if r >= o.expires_round:
            o.status = "expired"
        elif not _settleable(world, o):
            o.status = "superseded"
    for c in world.coalitions.values():
        if c.status != "proposed":
            continue
        if r >= c.expires_round:
            c.status = "expired"
        elif any(not _committable(world, bid, m) for m, ids in c.commitments.items() for bid in ids):
            c.status = "failed"


def _committable(world: World, block_id: str, owner: str) -> bool:
    b = world.blocks[block_id]
    return b.owner == owner and b.start_round > world.round_index and b.status in (BlockStatus.FREE, BlockStatus.RESERVED)


AWARD_RULES = ("none", "rule")


def _award_key(world: World, auction: Auction, judge: PitchJudge | None = None,
               records: dict[str, dict[str, Any]] | None = None) -> Any:
    """How pitches are ranked under the world's judge mode.

    ``none``: the highest bid wins (ties: better reputation, then lab id). ``rule``: the rule
    judge's score against the server's truth wins (ties: higher bid, then lab id), with a model
    ``judge``'s bounded opinion added if one is given (see :mod:`.judge`); the scores and reasons
    are recorded on the pitches, and what the model said in ``records``.
    """
    if world.judge_mode == "none":
        return lambda p: (-p.bid, -world.labs[p.lab_id].reputation, p.lab_id)
    if world.judge_mode == "rule":
        from .judge import judge_pitches

        scores = judge_pitches(world, auction, judge, records)
        for lab_id, sc in scores.items():
            auction.pitches[lab_id].score = round(sc.score, 6)
            auction.pitches[lab_id].reasons = sc.reasons
        return lambda p: (-scores[p.lab_id].score, -p.bid, p.lab_id)
    raise ValueError(f"unknown judge_mode {world.judge_mode!r}; known: {', '.join(AWARD_RULES)}")


def resolve_auctions(world: World, *, final: bool = False, judge: PitchJudge | None = None,
                     records: dict[str, dict[str, Any]] | None = None) -> set[str]:
    """Award contested resources whose pitching window has closed (by bid, or by the judge).

    A model ``judge`` (judge mode only) is asked only about auctions that will be awarded."""
    affected: set[str] = set()
    for a in world.auctions.values():
        if a.status != "open" or (world.round_index < a.close_round and not final):
            continue
        block = world.blocks[a.block_id]
        valid = [p for p in a.pitches.values()
                 if p.bid <= world.labs[p.lab_id].budget + 1e-9 and not world.labs[p.lab_id].finished]
        awardable = bool(valid) and block.start_round > world.round_index
        # in judge mode this also records every pitch's score and reasons
        rank = _award_key(world, a, judge if awardable else None, records)
        if not valid or block.start_round <= world.round_index:
            a.status = "unsold"
            block.status = BlockStatus.IDLE
            world.events.append(Event(world.round_index, "auction_unsold", f"{a.block_id} was not sold",
                                      {"auction_id": a.auction_id}))
            continue
        winner = min(valid, key=rank)
        lab = world.labs[winner.lab_id]
        lab.budget -= winner.bid  # paid to the market: money leaves the economy
        block.owner, block.status = winner.lab_id, BlockStatus.FREE
        a.status, a.winner, a.price = "awarded", winner.lab_id, winner.bid
        affected.add(winner.lab_id)
        world.events.append(Event(world.round_index, "auction_awarded",
                                  f"{winner.lab_id} won {a.block_id} for {winner.bid:.2f}",
                                  {"auction_id": a.auction_id, "winner": winner.lab_id, "price": winner.bid}))
    return affected


def start_blocks(world: World) -> tuple[set[str], dict[str, int], dict[str, int]]:
    """Windows opening this round: assigned blocks run (committed ones honour their coalition),
    the rest idle. Returns (affected labs, lapsed reservations per lab, condition breaches per lab).
    """
    r = world.round_index
    affected: set[str] = set()
    lapsed: dict[str, int] = {}
    breaches: dict[str, int] = {}
    for b in world.blocks.values():
        if b.start_round != r or b.owner is None:
            continue
        if b.status in (BlockStatus.ALLOCATED, BlockStatus.COMMITTED):
            if b.status == BlockStatus.COMMITTED:
                lab = world.labs[b.owner]
                lab.reputation = min(1.0, lab.reputation + REP_HONOURED)
            b.status = BlockStatus.RUNNING
        elif b.status in (BlockStatus.FREE, BlockStatus.RESERVED):
            affected.add(b.owner)
            if b.status == BlockStatus.RESERVED:
                lapsed[b.owner] = lapsed.get(b.owner, 0) + 1
            if b.must_allocate:
                breaches[b.owner] = breaches.get(b.owner, 0) + 1
                lab = world.labs[b.owner]
                lab.breaches += 1
                lab.commitments += 1
                lab.reputation = max(0.0, lab.reputation + REP_BREACH)
                world.events.append(Event(r, "breach", f"{b.owner} left {b.block_id} unused against its must_allocate_to_job condition",
                                          {"lab": b.owner, "block_id": b.block_id}))
            b.status, b.reserved_for = BlockStatus.IDLE, None
    for b in world.blocks.values():
        if b.status == BlockStatus.RUNNING and b.end_round <= r:
            b.status = BlockStatus.DONE
    return affected, lapsed, breaches


def settle_job(world: World, job: Job) -> set[str]:
    hours = valid_hours(world, job)
    v = job_value(job.value, job.gpu_hours_required, job.partial_credit, hours)
    job.realized_value = v
    job.status = "completed" if hours >= job.gpu_hours_required else ("partial" if v > 0 else "failed")
    if job.coalition_id is not None:
        c = world.coalitions[job.coalition_id]
        for m, share in c.shares.items():
            world.labs[m].realized_value += share * v
        c.status = "settled"
        return set(c.members)
    world.labs[job.owner].realized_value += v
    return {job.owner}


def settle_due_jobs(world: World) -> set[str]:
    affected: set[str] = set()
    for job in world.jobs.values():
        if job.status == "open" and job.deadline_round <= world.round_index:
            affected |= settle_job(world, job)
    return affected


def final_settlement(world: World, *, judge: PitchJudge | None = None,
                     records: dict[str, dict[str, Any]] | None = None) -> set[str]:
    """End of episode: close auctions, allocate every lab's remaining blocks by its best plan, settle all jobs."""
    affected = resolve_auctions(world, final=True, judge=judge, records=records)
    for lid in world.labs:
        if auto_allocate(world, lid):
            affected.add(lid)
    for o in world.offers.values():
        if o.status == "open":
            o.status = "expired"
    for c in world.coalitions.values():
        if c.status == "proposed":
            c.status = "expired"
    for job in world.jobs.values():
        if job.status == "open":
            affected |= settle_job(world, job)
    world.done = True
    return affected
