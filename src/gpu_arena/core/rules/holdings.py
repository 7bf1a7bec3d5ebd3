"""A lab's own blocks: reserve, release (a commitment released is a breach), allocate to a job, and
the best-plan allocation used when a lab finishes or the episode ends.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..types import (
    Action,
    BlockStatus,
    CoalitionStatus,
    Event,
    Job,
    JobStatus,
    World,
)
from ..valuation import best_allocation, block_fits
from .checks import block_named, check_fits, check_tradeable, coalition_peers, id_list, own_job
from .limits import REP_BREACH
from .outcome import ActionError, Outcome


def allocate_now(world: World, owner: str, job: Job | None, block_ids: Iterable[str]) -> list[str]:
    """Allocate received blocks to ``job`` where they fit and the owner can pay the energy."""
    done: list[str] = []
    if job is None or job.status != JobStatus.OPEN or job.owner != owner:
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


def reserve(world: World, lab_id: str, action: Action) -> Outcome:
    blocks = id_list(action.block_ids, "block_ids", required=True)
    job = own_job(world, action.job_id, lab_id)
    assert job is not None
    for bid in blocks:
        b = block_named(world, bid)
        check_tradeable(world, b, lab_id)
        check_fits(b, job)
    for bid in blocks:
        b = world.blocks[bid]
        b.status, b.reserved_for = BlockStatus.RESERVED, job.job_id
    return Outcome("allocation", {lab_id}, f"reserved {', '.join(blocks)} for {job.job_id}")


def release(world: World, lab_id: str, action: Action) -> Outcome:
    blocks = id_list(action.block_ids, "block_ids", required=True)
    for bid in blocks:
        b = block_named(world, bid)
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


def allocate(world: World, lab_id: str, action: Action) -> Outcome:
    if action.job_id is None and not action.block_ids:
        # no job and no blocks: apply the seat's whole best plan in one action, less the blocks it
        # committed to a coalition still gathering consents: allocating one would break the
        # coalition it agreed to, which a seat writing the short form never means (decision 0046)
        done, kept = allocate_plan(world, lab_id, keep=promised_blocks(world, lab_id))
        note = f"allocated {', '.join(done)} by your best plan" if done else "nothing to allocate"
        if kept:
            note += f"; kept {', '.join(kept)} free for your coalition"
        return Outcome("allocation", {lab_id} | coalition_peers(world, lab_id), note)
    if action.job_id is None:
        # blocks but no job: allocate those blocks where the seat's best plan puts them
        blocks = id_list(action.block_ids, "block_ids", required=True)
        for bid in blocks:
            b = block_named(world, bid)
            check_tradeable(world, b, lab_id, allow_reserved=True)
        done = auto_allocate(world, lab_id, only=set(blocks))
        idle = [bid for bid in blocks if bid not in done]
        note = f"allocated {', '.join(done) or 'nothing'} by your best plan"
        if idle:
            note += f"; your best plan has no job for {', '.join(idle)}"
        return Outcome("allocation", {lab_id} | coalition_peers(world, lab_id), note)
    job = own_job(world, action.job_id, lab_id)
    assert job is not None
    blocks = id_list(action.block_ids, "block_ids", required=True)
    energy = 0.0
    for bid in blocks:
        b = block_named(world, bid)
        if b.status == BlockStatus.RESERVED and b.reserved_for != job.job_id:
            raise ActionError("block_reserved", f"block {bid} is reserved for {b.reserved_for}")
        if b.status in (BlockStatus.ALLOCATED, BlockStatus.RUNNING, BlockStatus.DONE):
            raise ActionError("block_used", f"block {bid} is already allocated to {b.job_id}")
        check_tradeable(world, b, lab_id, allow_reserved=True)
        check_fits(b, job)
        energy += b.energy_cost * b.hours
    lab = world.labs[lab_id]
    if energy > lab.budget + 1e-9:
        raise ActionError("insufficient_budget", f"energy {energy:.2f} exceeds your budget {lab.budget:.2f}")
    allocate_now(world, lab_id, job, blocks)
    affected = {lab_id} | (coalition_peers(world, lab_id) if job.coalition_id else set())
    return Outcome("allocation", affected, f"allocated {', '.join(blocks)} to {job.job_id}")


def promised_blocks(world: World, lab_id: str) -> set[str]:
    """The lab's blocks committed to a coalition still gathering consents that it has consented to
    (as proposer or member): they stay free until the coalition forms, and allocating one breaks it."""
    return {bid for c in world.coalitions.values() if c.status == CoalitionStatus.PROPOSED and lab_id in c.consented
            for bid in c.commitments.get(lab_id, ())}


def auto_allocate(world: World, lab_id: str, only: set[str] | None = None) -> list[str]:
    """Allocate the lab's plannable blocks (or just ``only``) by its best plan (finish, final
    settlement, and ``allocate_to_job`` without a job); the ids of the blocks allocated."""
    return allocate_plan(world, lab_id, only)[0]


def allocate_plan(world: World, lab_id: str, only: set[str] | None = None,
                  keep: set[str] | frozenset[str] = frozenset()) -> tuple[list[str], list[str]]:
    """Allocate the lab's best plan (or its blocks in ``only``), leaving the plan's blocks in
    ``keep`` free; the ids allocated and the plan's ids kept, sorted. The plan is worked out once."""
    plan = best_allocation(world, lab_id)
    kept = sorted(bid for bid in plan.assignment if bid in keep)
    by_job: dict[str, list[str]] = {}
    for bid, jid in plan.assignment.items():
        if (only is None or bid in only) and bid not in keep:
            by_job.setdefault(jid, []).append(bid)
    done: list[str] = []
    for jid, bids in by_job.items():
        for bid in bids:
            b = world.blocks[bid]
            if b.status == BlockStatus.RESERVED:
                b.status = BlockStatus.FREE
        done += allocate_now(world, lab_id, world.jobs[jid], bids)
    return done, kept
