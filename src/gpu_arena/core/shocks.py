"""Market shocks (docs/design.md). Drawn into a hidden schedule at world generation; each fires at the
start of its round, draws its target from the episode RNG and is announced as a public event then,
never before."""

from __future__ import annotations

from .types import Auction, Block, BlockStatus, Event, JobStatus, ScheduledShock, World

_LIVE = (BlockStatus.FREE, BlockStatus.RESERVED, BlockStatus.ALLOCATED, BlockStatus.COMMITTED, BlockStatus.RUNNING)


def fire_due_shocks(world: World) -> set[str]:
    """Apply every scheduled shock for the current round; returns the labs it may have affected."""
    affected: set[str] = set()
    for shock in world.shock_schedule:
        if shock.round_index == world.round_index:
            affected |= _apply(world, shock)
    return affected


def _apply(world: World, shock: ScheduledShock) -> set[str]:
    handler = {
        "capacity_failure": _capacity_failure,
        "new_supply": _new_supply,
        "energy_spike": _energy_spike,
        "reliability_downgrade": _reliability_downgrade,
        "deadline_acceleration": _deadline_acceleration,
        "demand_surge": _demand_surge,
        "emergency_auction": _emergency_auction,
    }[shock.kind]
    return handler(world, shock)


def _announce(world: World, kind: str, text: str, **data: object) -> None:
    world.events.append(Event(world.round_index, kind, text, {"shock": True, **data}))


def _capacity_failure(world: World, shock: ScheduledShock) -> set[str]:
    candidates = [b for b in world.blocks.values() if b.owner is not None and b.status in _LIVE]
    if not candidates:
        return set()
    # unreliable hardware fails more often: reliability matters beyond the job floors
    weights = [1.05 - b.reliability for b in candidates]
    b = world.rng.choices(candidates, weights)[0]
    owner = world.labs[b.owner] if b.owner else None
    affected = {b.owner} if b.owner else set()
    if owner is not None and b.status in (BlockStatus.ALLOCATED, BlockStatus.COMMITTED) and b.energy_paid:
        owner.budget += b.energy_paid  # a block that never runs costs no energy
        owner.energy_paid -= b.energy_paid
        b.energy_paid = 0.0
    if b.coalition_id is not None and b.status == BlockStatus.COMMITTED:
        c = world.coalitions[b.coalition_id]
        c.excused.append(b.owner or "")  # a shock excuses the commitment: not a breach
        affected.update(c.members)
    if b.job_id is not None:
        job = world.jobs.get(b.job_id)
        if job is not None and job.coalition_id is not None:
            affected.update(world.coalitions[job.coalition_id].members)
    b.status = BlockStatus.FAILED
    _announce(world, "capacity_failure", f"block {b.block_id} of {b.owner} failed", block_id=b.block_id, lab=b.owner)
    return affected


def _new_block_id(world: World, prefix: str) -> str:
    return f"b_{prefix}{world.new_id('')[1:]}"


def _new_supply(world: World, shock: ScheduledShock) -> set[str]:
    rng = world.rng
    owner = rng.choice(sorted(world.labs))
    r = world.round_index
    b = Block(block_id=_new_block_id(world, "s"), owner=owner, gpu_count=rng.choice((2, 4, 8)),
              start_round=r + rng.randint(1, 3), duration=rng.randint(1, 3),
              reliability=round(rng.uniform(0.8, 0.99), 3), energy_cost=round(rng.uniform(0.15, 0.5), 3))
    world.blocks[b.block_id] = b
    _announce(world, "new_supply", f"new block {b.block_id} ({b.gpu_count} GPUs) went to {owner}",
              block_id=b.block_id, lab=owner)
    return {owner}


def _energy_spike(world: World, shock: ScheduledShock) -> set[str]:
    affected: set[str] = set()
    for b in world.blocks.values():
        if b.status in (BlockStatus.FREE, BlockStatus.RESERVED, BlockStatus.AUCTION) and b.start_round > world.round_index:
            b.energy_cost = round(b.energy_cost * shock.magnitude, 4)
            if b.owner:
                affected.add(b.owner)
    _announce(world, "energy_spike", f"energy prices of unallocated blocks rose x{shock.magnitude:.2f}",
              factor=shock.magnitude)
    return affected


def _reliability_downgrade(world: World, shock: ScheduledShock) -> set[str]:
    candidates = [b for b in world.blocks.values() if b.owner is not None and b.status in _LIVE]
    if not candidates:
        return set()
    b = world.rng.choice(candidates)
    b.reliability = round(max(0.3, b.reliability - shock.magnitude), 3)
    affected = {b.owner} if b.owner else set()
    if b.job_id and world.jobs[b.job_id].coalition_id:
        affected.update(world.coalitions[world.jobs[b.job_id].coalition_id or ""].members)
    _announce(world, "reliability_downgrade", f"block {b.block_id} reliability fell to {b.reliability}",
              block_id=b.block_id, reliability=b.reliability)
    return affected


def _deadline_acceleration(world: World, shock: ScheduledShock) -> set[str]:
    r = world.round_index
    candidates = [j for j in world.jobs.values() if j.status == JobStatus.OPEN and j.deadline_round > r + 1]
    if not candidates:
        return set()
    job = world.rng.choice(candidates)
    job.deadline_round = max(r + 1, job.deadline_round - 1 - int(shock.magnitude * 2))
    affected = {job.owner}
    if job.coalition_id:
        affected.update(world.coalitions[job.coalition_id].members)
    # which job and how much is private to its owner; the public learns only whose
    _announce(world, "deadline_acceleration", f"a deadline of {job.owner} moved earlier", lab=job.owner)
    return affected


def _demand_surge(world: World, shock: ScheduledShock) -> set[str]:
    candidates = [j for j in world.jobs.values() if j.status == JobStatus.OPEN and not j.surged]
    if not candidates:
        return set()
    job = world.rng.choice(candidates)
    job.value = round(job.value * shock.magnitude, 2)
    job.surged = True
    affected = {job.owner}
    if job.coalition_id:
        affected.update(world.coalitions[job.coalition_id].members)
    _announce(world, "demand_surge", f"demand surged for a job of {job.owner}", lab=job.owner)
    return affected


def _emergency_auction(world: World, shock: ScheduledShock) -> set[str]:
    rng = world.rng
    r = world.round_index
    b = Block(block_id=_new_block_id(world, "a"), owner=None, gpu_count=8, start_round=r + 3,
              duration=rng.randint(1, 2), reliability=round(rng.uniform(0.9, 0.99), 3),
              energy_cost=round(rng.uniform(0.15, 0.35), 3), status=BlockStatus.AUCTION)
    world.blocks[b.block_id] = b
    a = Auction(auction_id=world.new_id("a"), block_id=b.block_id, opened_round=r, close_round=r + 2)
    world.auctions[a.auction_id] = a
    _announce(world, "emergency_auction",
              f"emergency auction for {b.block_id}: pitch (make_pitch) before round {a.close_round}",
              block_id=b.block_id, auction_id=a.auction_id, close_round=a.close_round)
    return set()
