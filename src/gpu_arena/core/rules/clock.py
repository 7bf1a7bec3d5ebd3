"""The clock: what happens between rounds (expiry of offers and proposals, blocks starting, jobs
settling) and the final settlement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..allocation import job_value
from ..types import (
    BlockStatus,
    CoalitionStatus,
    Event,
    Job,
    JobStatus,
    Offer,
    OfferStatus,
    World,
)
from ..valuation import valid_hours

if TYPE_CHECKING:
    from ..judge import PitchJudge
from .auctions import resolve_auctions
from .holdings import auto_allocate
from .limits import REP_BREACH, REP_HONOURED


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
        if o.status != OfferStatus.OPEN:
            continue
        if r >= o.expires_round:
            o.status = OfferStatus.EXPIRED
        elif not _settleable(world, o):
            o.status = OfferStatus.SUPERSEDED
    for c in world.coalitions.values():
        if c.status != CoalitionStatus.PROPOSED:
            continue
        if r >= c.expires_round:
            c.status = CoalitionStatus.EXPIRED
        elif any(not _committable(world, bid, m) for m, ids in c.commitments.items() for bid in ids):
            c.status = CoalitionStatus.FAILED


def _committable(world: World, block_id: str, owner: str) -> bool:
    b = world.blocks[block_id]
    return b.owner == owner and b.start_round > world.round_index and b.status in (BlockStatus.FREE, BlockStatus.RESERVED)


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
    job.status = JobStatus.COMPLETED if hours >= job.gpu_hours_required else (JobStatus.PARTIAL if v > 0 else JobStatus.FAILED)
    if job.coalition_id is not None:
        c = world.coalitions[job.coalition_id]
        for m, share in c.shares.items():
            world.labs[m].realized_value += share * v
        c.status = CoalitionStatus.SETTLED
        return set(c.members)
    world.labs[job.owner].realized_value += v
    return {job.owner}


def settle_due_jobs(world: World) -> set[str]:
    affected: set[str] = set()
    for job in world.jobs.values():
        if job.status == JobStatus.OPEN and job.deadline_round <= world.round_index:
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
        if o.status == OfferStatus.OPEN:
            o.status = OfferStatus.EXPIRED
    for c in world.coalitions.values():
        if c.status == CoalitionStatus.PROPOSED:
            c.status = CoalitionStatus.EXPIRED
    for job in world.jobs.values():
        if job.status == JobStatus.OPEN:
            affected |= settle_job(world, job)
    world.done = True
    return affected
