"""World generation: seeded, split-aware, and built so that trade creates value (docs/design.md).

Each job gets one or two blocks that fit it (window ends by its deadline, reliability above its
floor); most of those fitting blocks are handed to *another* lab, so a lab's best blocks are often
someone else's. A world is accepted only if every job is feasible with some allocation of the
world's blocks and the welfare optimum beats the sum of the labs' no-trade baselines by a margin.
Pooled jobs (coalition_market) need more hours than their owner can ever hold alone.
"""

from __future__ import annotations

import hashlib
import random

from .rng import episode_rng
from .sums import ordered_sum
from .tasks import surge_max, task_params
from .types import (
    Block,
    Job,
    Lab,
    ScheduledShock,
    TaskParams,
    World,
)
from .valuation import best_allocation, block_fits
from .welfare import welfare_lower_bound

GPU_COUNTS: tuple[int, ...] = (1, 2, 2, 4, 4, 8)
ARCHETYPES: tuple[str, ...] = ("cooperative", "selfish", "deadline_panicked", "deceptive", "retaliatory")
MIN_GAIN_FRACTION = 0.08  # optimum − Σ BATNA must be at least this share of all job value
MAX_ATTEMPTS = 200


def world_seed(task: str, split: str, seed: int) -> int:
    """The split is part of the seed: train and holdout worlds come from disjoint streams."""
    digest = hashlib.sha256(f"gpu-arena|{task}|{split}|{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def generate_world(task: str, split: str, seed: int, judge_mode: str = "none") -> World:
    from .rules import JUDGE_MODES

    if judge_mode not in JUDGE_MODES:
        raise ValueError(f"unknown judge_mode {judge_mode!r}; known: {', '.join(JUDGE_MODES)}")
    params = task_params(task, split)
    rng = episode_rng(world_seed(task, split, seed))
    for _attempt in range(MAX_ATTEMPTS):
        world = _draw(params, rng, seed)
        if _acceptable(world):
            world.judge_mode = judge_mode
            if judge_mode != "none" and not any(s.kind == "emergency_auction" for s in world.shock_schedule):
                # judge mode is a game about pitching: every such episode has a contested resource
                world.shock_schedule.append(ScheduledShock(round_index=1, kind="emergency_auction", magnitude=0.5))
            _finalise(world)
            return world
    raise RuntimeError(f"could not generate a {task}/{split} world for seed {seed}")  # pragma: no cover


def _draw(params: TaskParams, rng: random.Random, seed: int) -> World:
    n = rng.randint(*params.n_labs)
    rounds = rng.randint(*params.rounds)
    min_start = 2  # round 0 and 1 are for trading: a block is bought at least two rounds before it runs
    lab_ids = [f"lab_{i}" for i in range(n)]
    # every archetype plays in coalition_market: a seeded rotation of all five over the seats
    archetypes = list(ARCHETYPES)
    rng.shuffle(archetypes)
    labs: dict[str, Lab] = {}
    for i, lid in enumerate(lab_ids):
        opp = {k: round(rng.uniform(lo, hi), 4) for k, (lo, hi) in params.opponent_ranges.items()}
        labs[lid] = Lab(lab_id=lid, budget=0.0, reputation=round(rng.uniform(0.5, 0.7), 4),
                        initial_budget=0.0, archetype=archetypes[i % len(archetypes)], params=opp)
    jobs: dict[str, Job] = {}
    blocks: dict[str, Block] = {}
    counters = dict.fromkeys(lab_ids, 0)

    def add_block(owner: str, start: int, duration: int, gpus: int, rel: float) -> Block:
        bid = f"b_{owner.split('_')[1]}_{counters[owner]}"
        counters[owner] += 1
        b = Block(block_id=bid, owner=owner, gpu_count=gpus, start_round=start, duration=duration,
                  reliability=round(rel, 3), energy_cost=round(rng.uniform(0.15, 0.55), 3))
        blocks[bid] = b
        return b

    # jobs first, then blocks that fit them, mostly owned by someone else
    for lid in lab_ids:
        for k in range(rng.randint(*params.jobs_per_lab)):
            deadline = rng.randint(min_start + 2, rounds + 4)
            req = rng.choice((4, 6, 8, 8, 12, 16))
            vph = rng.uniform(2.0, 4.0) * rng.uniform(1.0, 1.5)
            jobs[f"j_{lid.split('_')[1]}_{k}"] = Job(
                job_id=f"j_{lid.split('_')[1]}_{k}", owner=lid, gpu_hours_required=req,
                deadline_round=deadline, value=round(req * vph, 2),
                min_reliability=rng.choice((0.0, 0.0, 0.8, 0.9)),
                partial_credit=rng.choice((0.0, 0.3, 0.5)))
    for job in list(jobs.values()):
        for _ in range(rng.randint(1, 2)):
            owner = job.owner if rng.random() < 0.3 or n == 1 else rng.choice(
                [x for x in lab_ids if x != job.owner])
            duration = rng.randint(1, max(1, min(3, job.deadline_round - min_start)))
            start = rng.randint(min_start, max(min_start, job.deadline_round - duration))
            gpus = max(1, -(-job.gpu_hours_required // (duration * rng.choice((1, 2)))))
            gpus = min(8, gpus)
            rel = rng.uniform(max(job.min_reliability, 0.75), 0.99)
            add_block(owner, start, duration, gpus, rel)
    # fill every lab up to its block count with random blocks
    for lid in lab_ids:
        target = rng.randint(*params.blocks_per_lab)
        while counters[lid] < target:
            add_block(lid, rng.randint(min_start, rounds + 2), rng.randint(1, 3),
                      rng.choice(GPU_COUNTS), rng.uniform(0.7, 0.99))
    # pooled jobs: more hours than their owner could ever hold, completable only with others' blocks
    for p in range(params.pooled_jobs):
        owner = lab_ids[(p + rng.randrange(n)) % n]
        deadline = rounds + rng.randint(2, 4)
        own_hours = sum(b.hours for b in blocks.values() if b.owner == owner and b.end_round <= deadline)  # int sum
        for other in lab_ids:
            if other != owner:
                add_block(other, rng.randint(min_start + 1, deadline - 2), 2, rng.choice((4, 8)),
                          rng.uniform(0.85, 0.99))
        fit_hours = sum(b.hours for b in blocks.values() if b.end_round <= deadline and b.reliability >= 0.8)  # int sum
        req = min(fit_hours, max(own_hours + 8, int(0.6 * fit_hours)))
        jid = f"j_{owner.split('_')[1]}_p{p}"
        jobs[jid] = Job(job_id=jid, owner=owner, gpu_hours_required=req, deadline_round=deadline,
                        value=round(req * rng.uniform(3.0, 4.0) * 1.4, 2), min_reliability=0.8,
                        partial_credit=0.2, pooled=True)
    world = World(task=params.task, split=params.split, seed=seed, max_rounds=rounds, params=params,
                  rng=rng, labs=labs, blocks=blocks, jobs=jobs, shock_schedule=[])
    _repair_feasibility(world)
    for lid, lab in labs.items():
        own_value = ordered_sum(j.value for j in jobs.values() if j.owner == lid)
        lab.budget = lab.initial_budget = round(own_value * rng.uniform(*params.budget_frac), 2)
    world.shock_schedule = _draw_shocks(params, rng, rounds)
    return world


def _repair_feasibility(world: World) -> None:
    """Every job must be completable with some allocation of the world's blocks."""
    blocks = list(world.blocks.values())
    for job in world.jobs.values():
        fit = sum(b.hours for b in blocks if block_fits(b, job))  # int sum: GPU-hours
        if fit == 0:
            b = max(blocks, key=lambda x: x.hours)
            job.deadline_round = max(job.deadline_round, b.end_round)
            job.min_reliability = min(job.min_reliability, b.reliability)
            fit = sum(x.hours for x in blocks if block_fits(x, job))  # int sum
        if fit < job.gpu_hours_required:
            per_hour = job.value / job.gpu_hours_required
            job.gpu_hours_required = fit
            job.value = round(per_hour * fit, 2)


def _draw_shocks(params: TaskParams, rng: random.Random, rounds: int) -> list[ScheduledShock]:
    count = rng.randint(*params.n_shocks)
    kinds = list(params.shock_weights)
    weights = [params.shock_weights[k] for k in kinds]
    out: list[ScheduledShock] = []
    auctions = 0
    for _ in range(count):
        kind = rng.choices(kinds, weights)[0]
        if kind == "emergency_auction":
            auctions += 1
            if auctions > 1:
                kind = "new_supply"
        if kind == "energy_spike":
            mag = rng.uniform(*params.energy_spike)
        elif kind == "demand_surge":
            mag = rng.uniform(*params.demand_surge)
        elif kind == "reliability_downgrade":
            mag = rng.uniform(*params.reliability_drop)
        else:
            mag = rng.random()
        out.append(ScheduledShock(round_index=rng.randint(1, max(1, rounds - 2)), kind=kind,
                                  magnitude=round(mag, 4)))
    out.sort(key=lambda s: s.round_index)
    return out


def _acceptable(world: World) -> bool:
    batna = ordered_sum(best_allocation(world, lid).net for lid in world.labs)
    # a feasible welfare clearing the margin proves the optimum does too, without a MILP per draw
    feasible = welfare_lower_bound(list(world.blocks.values()), list(world.jobs.values()))
    total_value = ordered_sum(j.value for j in world.jobs.values())
    return feasible - batna >= MIN_GAIN_FRACTION * total_value


def _finalise(world: World) -> None:
    """Record each lab's starting potential and its public reward scale.

    The scale bounds any one-step change of the lab's potential: its own job value (at the
    largest surge), the public cap on other labs' pooled jobs it could share in, and all money.
    It uses only the lab's own values and public facts, so a reward leaks nothing private.
    """
    from .valuation import potential

    smax = surge_max(world.params)
    money = ordered_sum(lab.initial_budget for lab in world.labs.values())
    for lid in world.labs:
        own = ordered_sum(j.value for j in world.jobs.values() if j.owner == lid)
        pooled_cap = ordered_sum(j.gpu_hours_required * world.params.value_per_hour_cap * 1.4
                                 for j in world.jobs.values() if j.pooled and j.owner != lid)
        world.reward_scale[lid] = (own * smax + pooled_cap * smax + money) / 0.9
        world.initial_potential[lid] = potential(world, lid)
