"""Bilateral offers: send, counter, reject and accept (the settlement of an accepted offer)."""

from __future__ import annotations

from typing import Any

from ..types import (
    Action,
    BlockStatus,
    Event,
    Message,
    Offer,
    OfferStatus,
    World,
)
from ..valuation import LabValuer, potential
from .checks import (
    block_named,
    check_tradeable,
    check_unconditioned,
    coalition_peers,
    finite_amount,
    id_list,
    in_common_coalition,
    message_text,
    offer_conditions,
    open_offer,
    own_job,
    require_open,
    target_lab,
    ttl_rounds,
)
from .holdings import allocate_now
from .limits import MAX_OPEN_OFFERS, OFFER_TTL_DEFAULT, OFFER_TTL_MAX, REP_FAIR_DEAL
from .outcome import ActionError, Outcome


def _offer_terms(world: World, sender: str, target: str, action: Action) -> dict[str, Any]:
    blocks = id_list(action.block_ids, "block_ids")
    requested = id_list(action.requested_block_ids, "requested_block_ids")
    payment = finite_amount(action.payment, "payment")
    requested_payment = finite_amount(action.requested_payment, "requested_payment")
    if payment > 0 and requested_payment > 0:
        raise ActionError("invalid_payment", "set payment or requested_payment, not both")
    if not blocks and not requested and payment == 0 and requested_payment == 0:
        raise ActionError("empty_offer", "an offer must give or ask for blocks or money")
    if set(blocks) & set(requested):
        raise ActionError("duplicate_ids", "a block cannot be both offered and requested")
    for bid in blocks:
        b = block_named(world, bid)
        check_tradeable(world, b, sender)
        check_unconditioned(b)
    for bid in requested:
        b = block_named(world, bid)
        if b.owner != target:
            raise ActionError("block_not_owned", f"block {bid} is not owned by {target}")
        check_tradeable(world, b, target)
        check_unconditioned(b)
    lab = world.labs[sender]
    if payment > lab.budget + 1e-9:
        raise ActionError("insufficient_budget", f"payment {payment:.2f} exceeds your budget {lab.budget:.2f}")
    if requested_payment > world.labs[target].budget + 1e-9:
        raise ActionError("counterparty_cannot_pay", f"{target} cannot pay {requested_payment:.2f}")
    job = own_job(world, action.job_id, sender, required=False)
    return dict(blocks=blocks, requested=requested, payment=payment, requested_payment=requested_payment,
                conditions=offer_conditions(action.conditions), message=message_text(action.message),
                ttl=ttl_rounds(action.expires_in, OFFER_TTL_DEFAULT, OFFER_TTL_MAX),
                job_id=job.job_id if job else None)


def _create_offer(world: World, sender: str, target: str, terms: dict[str, Any], parent: str | None) -> Offer:
    open_count = sum(1 for o in world.offers.values()
                     if o.sender == sender and o.status == OfferStatus.OPEN and world.round_index < o.expires_round)
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


def send_offer(world: World, lab_id: str, action: Action) -> Outcome:
    target = target_lab(world, action.target_lab_id, lab_id)
    terms = _offer_terms(world, lab_id, target, action)
    offer = _create_offer(world, lab_id, target, terms, None)
    return Outcome(note=f"offer {offer.offer_id} sent to {target}")


def counter_offer(world: World, lab_id: str, action: Action) -> Outcome:
    original = open_offer(world, action.offer_id)
    if original.target != lab_id:
        raise ActionError("offer_not_addressed", f"offer {original.offer_id} is not addressed to you")
    require_open(world, original)
    terms = _offer_terms(world, lab_id, original.sender, action)
    offer = _create_offer(world, lab_id, original.sender, terms, original.offer_id)
    original.status = OfferStatus.COUNTERED
    return Outcome(note=f"counter-offer {offer.offer_id} sent to {original.sender}")


def reject_offer(world: World, lab_id: str, action: Action) -> Outcome:
    offer = open_offer(world, action.offer_id)
    if lab_id not in (offer.target, offer.sender):
        raise ActionError("offer_not_addressed", f"offer {offer.offer_id} is not yours")
    require_open(world, offer)
    offer.status = OfferStatus.REJECTED if offer.target == lab_id else OfferStatus.WITHDRAWN
    return Outcome(note=f"offer {offer.offer_id} {offer.status}")


def accept_offer(world: World, lab_id: str, action: Action) -> Outcome:
    offer = open_offer(world, action.offer_id)
    if offer.target != lab_id:
        raise ActionError("offer_not_addressed", f"offer {offer.offer_id} is not addressed to you")
    require_open(world, offer)
    sender, target = world.labs[offer.sender], world.labs[lab_id]
    if sender.finished:
        raise ActionError("offer_not_open", f"{offer.sender} has finished; its offers are void")
    for bid in offer.block_ids:
        b = block_named(world, bid)
        try:
            check_tradeable(world, b, offer.sender)
            check_unconditioned(b)
        except ActionError as e:
            raise ActionError("offer_stale", f"offer can no longer settle: {e.message}") from None
    for bid in offer.requested_block_ids:
        b = block_named(world, bid)
        check_tradeable(world, b, lab_id)
        check_unconditioned(b)
    requested_payment = offer.requested_payment
    if offer.payment > sender.budget + 1e-9:
        raise ActionError("offer_stale", f"{offer.sender} can no longer pay {offer.payment:.2f}")
    if requested_payment > target.budget + 1e-9:
        raise ActionError("insufficient_budget", f"you cannot pay {requested_payment:.2f}")
    if offer.conditions.get("coalition_only") and not in_common_coalition(world, offer.sender, lab_id):
        raise ActionError("condition_unmet", "coalition_only: you share no formed coalition with the sender")
    my_job = own_job(world, action.job_id, lab_id, required=False)
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
    auto = allocate_now(world, offer.sender, sender_job, offer.requested_block_ids)
    auto += allocate_now(world, lab_id, my_job, offer.block_ids)
    moved = set(offer.block_ids) | set(offer.requested_block_ids)
    for other in world.offers.values():
        if other.status == OfferStatus.OPEN and moved & (set(other.block_ids) | set(other.requested_block_ids)):
            other.status = OfferStatus.SUPERSEDED
    # each side valued once after the deal: its potential now, and the holdings the deal event keeps
    valuers = (LabValuer(world, offer.sender), LabValuer(world, lab_id))
    after = (potential(world, offer.sender, valuers[0]), potential(world, lab_id, valuers[1]))
    if after[0] >= before[0] - 1e-9 and after[1] >= before[1] - 1e-9:
        for lab in (sender, target):
            lab.reputation = min(1.0, lab.reputation + REP_FAIR_DEAL)
    world.events.append(Event(world.round_index, "deal", f"{offer.sender} and {lab_id} settled offer {offer.offer_id}",
                              {"offer_id": offer.offer_id, "labs": [offer.sender, lab_id],
                               "blocks": sorted(moved),
                               # what the deal did to each side's potential (the bargaining metrics)
                               "gains": [after[0] - before[0], after[1] - before[1]],
                               "joint": joint_holdings(*valuers)}))
    note = f"offer {offer.offer_id} settled" + (f"; allocated {', '.join(auto)}" if auto else "")
    affected = {offer.sender, lab_id} | coalition_peers(world, offer.sender) | coalition_peers(world, lab_id)
    return Outcome("deal", affected, note)


def joint_holdings(va: LabValuer, vb: LabValuer) -> dict[str, Any]:
    """Both labs' plannable blocks and open jobs as valuation keys, their budgets together, and the
    net value of their two best plans: whether the deal left joint gain on the table is then one
    allocation of the pooled blocks to the pooled jobs (``gpu_arena.league``), computed off the
    step. Read by no view."""
    return {"blocks": [list(k) for k in va.block_keys + vb.block_keys],
            "jobs": [list(k) for k in va.job_keys + vb.job_keys],
            "budget": va.budget + vb.budget, "net": va.plan().net + vb.plan().net}
