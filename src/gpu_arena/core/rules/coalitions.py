"""Coalitions for pooled jobs: proposal with shares and commitments, consent, and formation."""

from __future__ import annotations

import math
from typing import Any

from ..sums import ordered_sum
from ..types import (
    Action,
    BlockStatus,
    Coalition,
    CoalitionStatus,
    Event,
    JobStatus,
    Message,
    OfferStatus,
    World,
)
from .checks import (
    block_named,
    check_fits,
    check_tradeable,
    finite_amount,
    id_list,
    message_text,
    optional_str,
    own_job,
    target_lab,
    ttl_rounds,
)
from .limits import COALITION_TTL_DEFAULT, COALITION_TTL_MAX, MAX_OPEN_PROPOSALS
from .outcome import ActionError, Outcome


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
    if abs(ordered_sum(out.values()) - 1.0) > 1e-6:
        raise ActionError("invalid_shares", "shares must sum to 1")
    return out


def form_coalition(world: World, lab_id: str, action: Action) -> Outcome:
    job = own_job(world, action.job_id, lab_id)
    assert job is not None
    if not job.pooled:
        raise ActionError("job_not_poolable", f"job {job.job_id} is not a pooled job")
    if any(c.job_id == job.job_id and c.status == CoalitionStatus.FORMED for c in world.coalitions.values()):
        raise ActionError("coalition_exists", f"job {job.job_id} already has a formed coalition")
    members = id_list(action.member_lab_ids, "member_lab_ids", required=True)
    for m in members:
        target_lab(world, m, lab_id, what="member_lab_ids")
        if world.labs[m].finished:
            raise ActionError("lab_finished", f"{m} has finished")
    own = id_list(action.block_ids, "block_ids")
    requested = id_list(action.requested_block_ids, "requested_block_ids", required=True)
    if set(own) & set(requested):
        raise ActionError("duplicate_ids", "a block cannot be listed twice")
    commitments: dict[str, list[str]] = {m: [] for m in (lab_id, *members)}
    for bid in own:
        b = block_named(world, bid)
        check_tradeable(world, b, lab_id)
        check_fits(b, job)
        commitments[lab_id].append(bid)
    for bid in requested:
        b = block_named(world, bid)
        if b.owner not in members:
            raise ActionError("block_not_owned", f"block {bid} is not owned by a member")
        check_tradeable(world, b, b.owner)
        check_fits(b, job)
        commitments[b.owner].append(bid)
    for m in members:
        if not commitments[m]:
            raise ActionError("member_without_blocks", f"{m} is asked to commit no block")
    shares = _shares(action.shares, (lab_id, *members))
    payment = finite_amount(action.payment, "payment")
    if payment > world.labs[lab_id].budget + 1e-9:
        raise ActionError("insufficient_budget", f"payment {payment:.2f} exceeds your budget")
    ttl = ttl_rounds(action.expires_in, COALITION_TTL_DEFAULT, COALITION_TTL_MAX)
    text = message_text(action.message)
    open_props = sum(1 for c in world.coalitions.values() if c.proposer == lab_id and c.status == CoalitionStatus.PROPOSED)
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


def commit(world: World, lab_id: str, action: Action) -> Outcome:
    cid = optional_str(action.coalition_id, "coalition_id")
    if cid is None:
        raise ActionError("missing_field", "coalition_id is required")
    c = world.coalitions.get(cid)
    if c is None:
        raise ActionError("unknown_coalition", f"no coalition {cid!r}")
    if lab_id not in c.members:
        raise ActionError("not_a_member", f"you are not a member of {cid}")
    if c.status != CoalitionStatus.PROPOSED or world.round_index >= c.expires_round:
        raise ActionError("coalition_not_open", f"coalition {cid} is {c.status if c.status != 'proposed' else 'expired'}")
    if lab_id in c.consented:
        raise ActionError("already_committed", f"you have already committed to {cid}")
    job = world.jobs[c.job_id]
    mine = c.commitments.get(lab_id, ())
    for bid in mine:
        b = block_named(world, bid)
        check_tradeable(world, b, lab_id)
        check_fits(b, job)
    energy = ordered_sum(world.blocks[b].energy_cost * world.blocks[b].hours for b in mine)
    if energy > world.labs[lab_id].budget + 1e-9:
        raise ActionError("insufficient_budget", f"you cannot pay the energy ({energy:.2f}) of your committed blocks")
    c.consented.add(lab_id)
    if set(c.members) != c.consented:
        return Outcome(note=f"committed to {cid}; waiting for {', '.join(m for m in c.members if m not in c.consented)}")
    problem = _formation_problem(world, c)
    if problem:
        c.status = CoalitionStatus.FAILED
        world.events.append(Event(world.round_index, "coalition_failed", f"coalition {cid} could not form: {problem}",
                                  {"coalition_id": cid}))
        return Outcome(note=f"coalition {cid} could not form: {problem}")
    _form(world, c)
    return Outcome("coalition", set(c.members), f"coalition {cid} formed")


def _formation_problem(world: World, c: Coalition) -> str:
    job = world.jobs[c.job_id]
    if job.status != JobStatus.OPEN:
        return "the pooled job has settled"
    if any(o.status == CoalitionStatus.FORMED and o.job_id == c.job_id for o in world.coalitions.values()):
        return "the job already has a coalition"
    for m, blocks in c.commitments.items():
        energy = 0.0
        for bid in blocks:
            b = world.blocks[bid]
            try:
                check_tradeable(world, b, m)
                check_fits(b, job)
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
    hours = {m: sum(world.blocks[b].hours for b in c.commitments[m]) for m in others}  # int sum: GPU-hours
    total_hours = sum(hours.values())  # int sum
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
    c.status = CoalitionStatus.FORMED
    committed = {b for bl in c.commitments.values() for b in bl}
    for o in world.offers.values():
        if o.status == OfferStatus.OPEN and committed & (set(o.block_ids) | set(o.requested_block_ids)):
            o.status = OfferStatus.SUPERSEDED
    world.events.append(Event(world.round_index, "coalition_formed",
                              f"coalition {c.coalition_id} formed by {', '.join(c.members)}",
                              {"coalition_id": c.coalition_id, "members": list(c.members)}))
