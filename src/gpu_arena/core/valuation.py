"""Valuation: a lab's best allocation of its blocks to its jobs, its potential, and the welfare optimum.

The same functions price everything: the reward's potential, the seat's decision aids, the
opponents' offer valuations and the final settlement. ``best_allocation`` is an exact dynamic
program over blocks whose state is the capped hours per job (capping is exact because a job's
value stops growing at its requirement). ``social_optimum`` is the same program over a whole
world, pruned by Lagrangian and knapsack bounds (exact; a MILP solved by HiGHS is its fallback).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .types import ASSIGNED, PLANNABLE, Block, BlockStatus, Job, World

# (hours, end_round, reliability, energy_total)
BlockKey = tuple[int, int, float, float]
# (required, fixed_hours, deadline, min_reliability, value (share-weighted), partial_credit)
JobKey = tuple[int, int, int, float, float, float]


def job_value(value: float, required: int, partial_credit: float, hours: float) -> float:
    """Value of a job given the valid hours assigned to it."""
    if hours >= required:
        return value
    if partial_credit <= 0.0 or hours <= 0:
        return 0.0
    return value * partial_credit * hours / required


def block_fits(block: Block, job: Job) -> bool:
    return block.end_round <= job.deadline_round and block.reliability >= job.min_reliability


# DP states are the capped valid hours per job, packed into one int (mixed radix: job k's hours
# times the product of (cap + 1) of the jobs before it): cheaper to build and hash than tuples
Frontier = dict[int, float]  # state -> minus the least energy that reaches it
# per block: state -> (previous state, job) for the states that block reached or improved; a state
# missing from a block's map came through it unchanged (the block serves no job on that path)
Parents = tuple[dict[int, tuple[int, int]], ...]


def _radix(jobs: tuple[JobKey, ...]) -> tuple[tuple[int, int], ...]:
    """(multiplier, radix) of each job's digit in a packed state."""
    out = []
    mult = 1
    for j in jobs:
        radix = max(j[0], 0) + 1
        out.append((mult, radix))
        mult *= radix
    return tuple(out)


def _dp(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...],
        radix: tuple[tuple[int, int], ...]) -> tuple[Frontier, Parents]:
    """Dynamic program over blocks. State: capped valid hours per job; kept: least energy to reach it.

    Keeping only the least energy per state is exact both for the objective (value depends on the
    state alone) and for the budget constraint on energy applied at the end. Its result is kept
    by :func:`_frontier`, per (blocks, jobs). ``radix``: ``_radix(jobs)``.
    """
    frontier: Frontier = {sum(min(j[1], j[0]) * m for j, (m, _r) in zip(jobs, radix, strict=True)): 0.0}
    parents = []
    for hours, end, rel, energy in blocks:
        options = [
            (k, mult, r, req)
            for k, ((req, _f, deadline, min_rel, value, _pc), (mult, r)) in enumerate(zip(jobs, radix, strict=True))
            if end <= deadline and rel >= min_rel and value > 0 and req > 0
        ]
        par: dict[int, tuple[int, int]] = {}
        parents.append(par)
        if not options:
            continue  # the block serves no job: every state passes through unchanged
        nxt = dict(frontier)
        get = nxt.get
        for state, neg_e in frontier.items():
            ne = neg_e - energy
            for k, mult, r, cap in options:
                h = state // mult % r
                if h >= cap:
                    continue
                nh = h + hours
                ns = state + ((cap if nh > cap else nh) - h) * mult  # capped: hours past the need never count
                old = get(ns)
                if old is None or ne > old + 1e-12:
                    nxt[ns] = ne
                    par[ns] = (state, k)
        frontier = nxt
    return frontier, tuple(parents)


INF = float("inf")
# up to this many (state, job) pairs a frontier's values are summed state by state, past it job by job
_SMALL_FRONTIER = 48


class _Frontier:
    """The solved DP of one (blocks, jobs) pair, with everything priced off it memoised.

    Built once per pair (see :func:`_frontier`). ``codes`` (packed) and ``states`` (hours per job)
    with ``neg_e`` are the frontier in its own order; ``vals`` holds each state's per-job values and
    ``base`` their sums, computed by the same scalar code and summation order as a direct
    evaluation (``sum`` of ``job_value`` per job), so every price read off them is bit-identical to
    it. ``max_energy`` is the largest energy of any state: a budget at least that large constrains
    no plan, so results for such budgets are memoised under an infinite budget and shared by every
    lab state that differs only in its money (``solved``: plans by budget; ``extras``: one-more-
    block prices by block and budget).
    """

    __slots__ = ("_arrays", "_states", "_vals", "base", "codes", "extras", "jobs", "max_energy", "neg_e", "parents",
                 "radix", "solved")

    def __init__(self, blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...]) -> None:
        self.jobs = jobs
        self.radix = _radix(jobs)
        frontier, self.parents = _dp(blocks, jobs, self.radix)
        self.codes = tuple(frontier)
        self.neg_e = tuple(frontier.values())
        self._states: tuple[tuple[int, ...], ...] | None = None
        self._vals: tuple[tuple[float, ...], ...] | None = None
        if len(self.codes) * len(jobs) <= _SMALL_FRONTIER:
            self.base = tuple(sum(job_value(j[4], j[0], j[5], code // mult % r)
                                  for j, (mult, r) in zip(jobs, self.radix, strict=True)) for code in self.codes)
        else:
            self.base = tuple(map(sum, self.vals))
        self.max_energy = -min(self.neg_e)
        self.solved: dict[float, tuple[float, float, tuple[int, ...]]] = {}
        self.extras: dict[tuple[BlockKey, float], tuple[float, int]] = {}
        self._arrays: tuple[np.ndarray, ...] | None = None

    @property
    def states(self) -> tuple[tuple[int, ...], ...]:
        """Each state's hours per job, in frontier order."""
        if self._states is None:
            hours = [[code // mult % r for code in self.codes] for mult, r in self.radix]
            self._states = tuple(zip(*hours, strict=True)) if self.jobs else ((),) * len(self.codes)
        return self._states

    @property
    def vals(self) -> tuple[tuple[float, ...], ...]:
        """Each state's value per job (a job's value depends on its own hours only, so each
        (job, hours) pair is evaluated once)."""
        if self._vals is None:
            columns = []
            for k, j in enumerate(self.jobs):
                column = [state[k] for state in self.states]
                table = {h: job_value(j[4], j[0], j[5], h) for h in set(column)}
                columns.append(map(table.__getitem__, column))
            self._vals = tuple(zip(*columns, strict=True)) if self.jobs else ((),) * len(self.codes)
        return self._vals

    def budget_for(self, budget: float, energy: float = 0.0) -> float:
        """``budget``, or ∞ where it binds no state even with ``energy`` more to pay (same results)."""
        return INF if budget + 1e-9 >= self.max_energy + energy else budget

    def solve(self, budget: float) -> tuple[float, float, tuple[int, ...]]:
        """Best assignment whose energy fits ``budget``: (value, energy, job index per block or -1)."""
        budget = self.budget_for(budget)
        hit = self.solved.get(budget)
        if hit is not None:
            return hit
        limit = budget + 1e-9
        best_i, best_total, best_value = -1, -INF, 0.0
        for i, (neg_e, v) in enumerate(zip(self.neg_e, self.base, strict=True)):
            if -neg_e > limit:
                continue
            if v + neg_e > best_total + 1e-12:
                best_i, best_total, best_value = i, v + neg_e, v
        assert best_i >= 0  # assigning nothing costs nothing and is always in the frontier
        choices = [-1] * len(self.parents)
        state = self.codes[best_i]
        for i in range(len(self.parents) - 1, -1, -1):
            step = self.parents[i].get(state)
            if step is not None:  # else the state came through block i unchanged: it serves no job
                state, choices[i] = step
        out = self.solved[budget] = (best_value, best_value - best_total, tuple(choices))
        return out

    def arrays(self) -> tuple[np.ndarray, ...]:
        """(states, neg_e, vals, base) as arrays, built on first use."""
        if self._arrays is None:
            n, n_jobs = len(self.states), len(self.jobs)
            self._arrays = (np.array(self.states, dtype=np.int64).reshape(n, n_jobs),
                            np.array(self.neg_e, dtype=np.float64),
                            np.array(self.vals, dtype=np.float64).reshape(n, n_jobs),
                            np.array(self.base, dtype=np.float64))
        return self._arrays


@lru_cache(maxsize=1 << 13)
def _frontier(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...]) -> _Frontier:
    return _Frontier(blocks, jobs)


def _solve(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...],
           budget: float = INF) -> tuple[float, float, tuple[int, ...]]:
    """Exact best assignment whose energy fits ``budget``: (value, energy, job index per block or -1)."""
    return _frontier(blocks, jobs).solve(budget)


def _with_extra(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...], extra: BlockKey,
                budget: float) -> tuple[float, int]:
    """Best value − energy with one more block, from the cached frontier of ``blocks``, and the
    job index the extra block serves in that best plan (-1: it serves none). Memoised per frontier;
    :func:`with_extras` prices many blocks at once with the same results."""
    fr = _frontier(blocks, jobs)
    key = (extra, fr.budget_for(budget, extra[3]))
    hit = fr.extras.get(key)
    if hit is None:
        hit = fr.extras[key] = _scan_extra(fr, extra, key[1])
    return hit


def _scan_extra(fr: _Frontier, extra: BlockKey, budget: float) -> tuple[float, int]:
    """The scalar what-if: scan the frontier once for the best use of one more block."""
    jobs = fr.jobs
    hours, end, rel, energy = extra
    fits = [k for k, (req, _f, deadline, min_rel, value, _pc) in enumerate(jobs)
            if end <= deadline and rel >= min_rel and value > 0 and req > 0]
    best, choice = -INF, -1
    for state, neg_e, vals, base in zip(fr.states, fr.neg_e, fr.vals, fr.base, strict=True):
        if -neg_e > budget + 1e-9:
            continue
        if base + neg_e > best + 1e-12:
            best, choice = base + neg_e, -1
        if -neg_e + energy > budget + 1e-9:
            continue
        for k in fits:
            req = jobs[k][0]
            if state[k] >= req:
                continue
            gain = job_value(jobs[k][4], req, jobs[k][5], min(state[k] + hours, req)) - vals[k]
            if base + gain + neg_e - energy > best + 1e-12:
                best, choice = base + gain + neg_e - energy, k
    return best, choice


# below this many (state, extra block, job) triples a batch is priced by the scalar scan
_BATCH_MIN = 256


def with_extras(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...], extras: Sequence[BlockKey],
                budget: float) -> list[tuple[float, int]]:
    """:func:`_with_extra` for many extra blocks at once, with exactly its results.

    Large batches are priced in one array pass over the frontier: the candidates are laid out in
    the scalar scan's order (state by state: no job, then each job) and its "better by more than
    1e-12" rule is replayed with a running maximum; a row where that rule could pick another
    near-tie (a candidate within 1e-12 above the best so far) is re-scanned by the scalar rule.
    """
    fr = _frontier(blocks, jobs)
    keys = [(e, fr.budget_for(budget, e[3])) for e in extras]
    missing = [k for k in dict.fromkeys(keys) if k not in fr.extras]
    if missing:
        if len(missing) * len(fr.states) * max(1, len(jobs)) < _BATCH_MIN:
            for key in missing:
                fr.extras[key] = _scan_extra(fr, key[0], key[1])
        else:
            for b in {k[1] for k in missing}:
                group = [k for k in missing if k[1] == b]
                fr.extras.update(zip(group, _price_extras(fr, [k[0] for k in group], b), strict=True))
    return [fr.extras[k] for k in keys]


def _price_extras(fr: _Frontier, extras: list[BlockKey], budget: float) -> list[tuple[float, int]]:
    """The array form of :func:`_scan_extra` for many extra blocks under one budget."""
    states, neg_e, vals, base = fr.arrays()
    jobs = fr.jobs
    n_jobs, n_extra = len(jobs), len(extras)
    req = np.array([j[0] for j in jobs], dtype=np.int64)
    deadline = np.array([j[2] for j in jobs], dtype=np.int64)
    min_rel, value, pc = (np.array([j[i] for j in jobs], dtype=np.float64) for i in (3, 4, 5))
    ex = np.array(extras, dtype=np.float64).reshape(n_extra, 4)
    hours = ex[:, 0].astype(np.int64)
    end = ex[:, 1].astype(np.int64)
    rel, energy = ex[:, 2], ex[:, 3]
    # (extra, state, job): the job's value with the extra block's hours added, as job_value computes it
    new_h = np.minimum(states[None, :, :] + hours[:, None, None], req)
    with np.errstate(divide="ignore", invalid="ignore"):
        partial = (value * pc) * new_h / req
    new_v = np.where(new_h >= req, value, np.where((pc <= 0.0) | (new_h <= 0), 0.0, partial))
    cand = ((base[:, None] + (new_v - vals)) + neg_e[:, None]) - energy[:, None, None]
    fits = (end[:, None] <= deadline) & (rel[:, None] >= min_rel) & (value > 0) & (req > 0)
    state_ok = ~(-neg_e > budget + 1e-9)
    affordable = ~(-neg_e + energy[:, None] > budget + 1e-9)
    usable = fits[:, None, :] & (state_ok & affordable)[:, :, None] & (states < req)
    rows = np.empty((n_extra, len(base), 1 + n_jobs))
    rows[:, :, 0] = np.where(state_ok, base + neg_e, -INF)
    rows[:, :, 1:] = np.where(usable, cand, -INF)
    flat = rows.reshape(n_extra, -1)
    # the scalar scan takes a candidate iff it beats the best so far by more than 1e-12; as long as
    # no candidate lies in (running max, running max + 1e-12], the best so far is the running max
    run_max = np.maximum.accumulate(flat, axis=1)
    before = np.empty_like(flat)
    before[:, 0] = -INF
    before[:, 1:] = run_max[:, :-1]
    taken = flat > before + 1e-12
    unsure: list[bool] = np.any((flat > before) & ~taken, axis=1).tolist()
    anything: list[bool] = np.any(taken, axis=1).tolist()
    last: list[int] = (flat.shape[1] - 1 - np.argmax(taken[:, ::-1], axis=1)).tolist()
    width = 1 + n_jobs
    out: list[tuple[float, int]] = []
    for i in range(n_extra):
        if unsure[i]:
            out.append(_replay(flat[i].tolist(), width))
        elif not anything[i]:
            out.append((-INF, -1))
        else:
            idx = last[i]
            out.append((float(flat[i, idx]), idx % width - 1))
    return out


def _replay(row: list[float], width: int) -> tuple[float, int]:
    """The scalar rule on one laid-out row: keep a candidate only if it beats the best by > 1e-12."""
    best, choice = -INF, -1
    for idx, x in enumerate(row):
        if x > best + 1e-12:
            best, choice = x, idx % width - 1
    return best, choice


@dataclass(frozen=True, slots=True)
class Plan:
    """A lab's best use of its plannable blocks: job value reachable and energy still to pay."""

    value: float
    energy: float
    assignment: dict[str, str]  # block_id -> job_id

    @property
    def net(self) -> float:
        return self.value - self.energy


def valid_hours(world: World, job: Job) -> int:
    """Hours already assigned to ``job`` that will count at settlement."""
    total = 0
    for b in world.blocks.values():
        if b.job_id == job.job_id and b.status in ASSIGNED and block_fits(b, job):
            total += b.hours
    return total


def owner_share(world: World, job: Job) -> float:
    if job.coalition_id is None:
        return 1.0
    return world.coalitions[job.coalition_id].shares.get(job.owner, 0.0)


def _block_key(b: Block) -> BlockKey:
    return (b.hours, b.end_round, b.reliability, b.energy_cost * b.hours)


class LabValuer:
    """Prices hypothetical holdings for one lab: the jobs side is computed once, blocks vary.

    Used for decision aids (marginal value of a block, value of an offer) where many
    what-if plans share the same jobs. A valuer describes one world state: build a new one after
    the world changes. ``plan()`` (no what-if) is computed once per valuer.
    """

    __slots__ = ("_base", "block_keys", "blocks", "budget", "job_keys", "jobs", "round_index")

    def __init__(self, world: World, lab_id: str, budget: float | None = None) -> None:
        r = world.round_index
        jobs = [j for j in world.jobs.values() if j.owner == lab_id and j.status == "open"]
        mine = {j.job_id: j for j in jobs}
        hours = dict.fromkeys(mine, 0)
        blocks: list[Block] = []
        # one pass over the blocks: the lab's plannable ones, and valid hours already on its jobs
        for b in world.blocks.values():
            jid = b.job_id
            if jid is not None and jid in mine and b.status in ASSIGNED and block_fits(b, mine[jid]):
                hours[jid] += b.hours
            elif b.owner == lab_id and b.status in PLANNABLE and b.start_round > r:
                blocks.append(b)
        self._setup(world, lab_id, budget, jobs, blocks, hours)

    @classmethod
    def from_parts(cls, world: World, lab_id: str, jobs: list[Job], blocks: list[Block],
                   hours: Mapping[str, int]) -> LabValuer:
        """A valuer from inputs already gathered for this world state: the lab's open ``jobs`` and
        plannable ``blocks`` (both in world order) and the valid ``hours`` on each job (a view
        index gathers them for every lab in one pass). Equal to ``LabValuer(world, lab_id)``."""
        valuer = cls.__new__(cls)
        valuer._setup(world, lab_id, None, jobs, blocks, hours)
        return valuer

    def _setup(self, world: World, lab_id: str, budget: float | None, jobs: list[Job], blocks: list[Block],
               hours: Mapping[str, int]) -> None:
        self.round_index = world.round_index
        self.budget = world.labs[lab_id].budget if budget is None else budget
        self.jobs = jobs
        self.blocks = blocks
        # _block_key inlined: a valuer is built for every lab the ledger re-prices
        self.block_keys = tuple((h, b.start_round + b.duration, b.reliability, b.energy_cost * h)
                                for b, h in zip(blocks, [b.gpu_count * b.duration for b in blocks], strict=True))
        self.job_keys = tuple(
            (j.gpu_hours_required, hours[j.job_id], j.deadline_round, j.min_reliability,
             j.value * owner_share(world, j), j.partial_credit)
            for j in jobs)
        self._base: tuple[float, float, dict[str, str]] | None = None

    def plan(self, extra: Iterable[Block] = (), without: Iterable[str] = (), money: float = 0.0) -> Plan:
        """Best plan with ``extra`` blocks, without ``without``, and ``money`` added to the budget."""
        if not self.jobs:
            return Plan(0.0, 0.0, {})
        drop = set(without)
        extra = [b for b in extra if b.start_round > self.round_index]
        if not drop and not extra and not money:
            if self._base is None:
                value, energy, choices = _solve(self.block_keys, self.job_keys, max(0.0, self.budget + money))
                self._base = (value, energy, {b.block_id: self.jobs[k].job_id
                                              for b, k in zip(self.blocks, choices, strict=True) if k >= 0})
            value, energy, assignment = self._base
            return Plan(value, energy, dict(assignment))  # a fresh dict: callers may keep or change it
        if not drop and not extra:
            blocks, keys = self.blocks, self.block_keys
        else:
            blocks = [b for b in self.blocks if b.block_id not in drop] + extra
            keys = tuple(_block_key(b) for b in blocks)
        value, energy, choices = _solve(keys, self.job_keys, max(0.0, self.budget + money))
        assignment = {b.block_id: self.jobs[k].job_id for b, k in zip(blocks, choices, strict=True) if k >= 0}
        return Plan(value, energy, assignment)

    def net(self, extra: Iterable[Block] = (), without: Iterable[str] = (), money: float = 0.0) -> float:
        extra = list(extra)
        drop = set(without)
        if len(extra) == 1 and not drop and not money and self.jobs:
            if extra[0].start_round <= self.round_index:
                return self.plan().net
            return _with_extra(self.block_keys, self.job_keys, _block_key(extra[0]), self.budget)[0]
        return self.plan(extra, drop, money).net

    def job_for(self, block: Block) -> str | None:
        """The job ``block`` would serve in this lab's best plan if it held it (None: no job)."""
        if not self.jobs or block.start_round <= self.round_index:
            return None
        _best, k = _with_extra(self.block_keys, self.job_keys, _block_key(block), self.budget)
        return self.jobs[k].job_id if k >= 0 else None

    def extra_prices(self, blocks: Sequence[Block], keys: Sequence[BlockKey] | None = None
                     ) -> list[tuple[float, str | None]]:
        """For each of ``blocks`` (all starting after this round): ``net(extra=[b])`` and
        ``job_for(b)``, priced together (see :func:`with_extras`). ``keys`` may pass
        ``_block_key`` of each block (a view index has them for every seat)."""
        if not self.jobs:
            return [(0.0, None)] * len(blocks)
        if keys is None:
            keys = [_block_key(b) for b in blocks]
        prices = with_extras(self.block_keys, self.job_keys, keys, self.budget)
        return [(best, self.jobs[k].job_id if k >= 0 else None) for best, k in prices]

    def nets_without_each(self) -> list[float]:
        """``net(without=(b.block_id,))`` for each of this lab's plannable blocks, in order."""
        if not self.jobs:
            return [0.0] * len(self.blocks)
        keys, budget = self.block_keys, max(0.0, self.budget + 0.0)
        base_value, base_energy, choices = _solve(keys, self.job_keys, budget)
        out = []
        for i in range(len(keys)):
            if choices[i] < 0:
                # the best plan does not use block i, so it stays feasible and optimal without it:
                # no second DP (about half of a lab's blocks, and the priciest part of the aids)
                out.append(base_value - base_energy)
                continue
            value, energy, _choices = _solve(keys[:i] + keys[i + 1:], self.job_keys, budget)
            out.append(value - energy)
        return out


def best_allocation(world: World, lab_id: str, extra: Iterable[Block] = (),
                    without: Iterable[str] = ()) -> Plan:
    """The lab's optimal allocation of its plannable blocks (plus ``extra``, minus ``without``)."""
    return LabValuer(world, lab_id).plan(extra, without)


def member_share_value(world: World, lab_id: str, hours: Mapping[str, int] | None = None) -> float:
    """Value a lab expects from formed coalitions on other labs' jobs, at the hours pooled so far.

    ``hours`` may pass every job's valid hours for this world state (else they are counted here).
    """
    total = 0.0
    for c in world.coalitions.values():
        if c.status != "formed" or lab_id not in c.shares:
            continue
        job = world.jobs[c.job_id]
        if job.owner == lab_id or job.status != "open":
            continue
        pooled = valid_hours(world, job) if hours is None else hours[job.job_id]
        total += c.shares[lab_id] * job_value(job.value, job.gpu_hours_required, job.partial_credit, pooled)
    return total


def potential_parts(world: World, lab_id: str, plan: Plan | None = None) -> tuple[float, float]:
    """Φ split into (value part, money part); Φ = value + money.

    value: realised job value + value reachable by the best plan + coalition shares.
    money: budget − energy the best plan would still pay.
    """
    lab = world.labs[lab_id]
    if plan is None:
        plan = best_allocation(world, lab_id)
    value = lab.realized_value + plan.value + member_share_value(world, lab_id)
    money = lab.budget - plan.energy
    return value, money


def potential(world: World, lab_id: str) -> float:
    v, m = potential_parts(world, lab_id)
    return v + m


def greedy_allocation(blocks: Sequence[Block], jobs: Sequence[Job]) -> tuple[float, dict[str, str]]:
    """A feasible (so never optimistic) planner's allocation: jobs in order of value density each
    take their best subset of the blocks still unused. Returns (welfare, block_id -> job_id)."""
    remaining = [b for b in blocks if b.status != BlockStatus.FAILED]
    total = 0.0
    assignment: dict[str, str] = {}
    for job in sorted(jobs, key=lambda j: (-j.value / max(1, j.gpu_hours_required), j.job_id)):
        fit = [b for b in remaining if block_fits(b, job)]
        if not fit:
            continue
        key = ((job.gpu_hours_required, 0, job.deadline_round, job.min_reliability, job.value, job.partial_credit),)
        value, energy, choices = _solve(tuple(_block_key(b) for b in fit), key)  # no budget: a planner's bound
        if value - energy <= 0:
            continue
        total += value - energy
        used = {b.block_id for b, k in zip(fit, choices, strict=True) if k >= 0}
        assignment.update(dict.fromkeys(used, job.job_id))
        remaining = [b for b in remaining if b.block_id not in used]
    return total, assignment


def welfare_lower_bound(blocks: Sequence[Block], jobs: Sequence[Job]) -> float:
    """The greedy allocation's welfare: deterministic and fast; used to accept generated worlds."""
    return greedy_allocation(blocks, jobs)[0]


@contextmanager
def _quiet_native_output() -> Iterator[None]:
    """Silence what native code writes to fds 1 and 2 (HiGHS prints internal debug lines on some
    models), flushing C stdio buffers before the descriptors are restored."""
    import ctypes
    import sys

    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:  # pragma: no cover - no standard descriptors to silence
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            os.dup2(devnull.fileno(), 2)
            try:
                yield
            finally:
                libc.fflush(None)
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def social_optimum(blocks: Sequence[Block], jobs: Sequence[Job]) -> float:
    """Exact maximum of Σ job value − Σ energy over all assignments of ``blocks`` to ``jobs``.

    Ownership and timing of trades are ignored: it is the welfare a perfect planner reaches.
    Failed blocks and jobs worth nothing take no part; a job that needs no hours is worth its
    value. The blocks and jobs split into independent components (jobs linked by a block that
    fits both), each solved by :class:`_WelfareSearch`, an exact search over blocks; a component
    whose search outgrows its memory budget is solved by the MILP :func:`_welfare_milp` instead.
    """
    usable = [b for b in blocks if b.status != BlockStatus.FAILED and b.hours > 0]  # no hours: adds nothing
    total = 0.0
    live: list[Job] = []
    for j in jobs:
        if j.value <= 0:
            continue
        if j.gpu_hours_required <= 0:  # complete with no hours at all
            total += j.value
            continue
        live.append(j)
    for part_blocks, part_jobs in _welfare_components(usable, live):
        found = _WelfareSearch(part_blocks, part_jobs).solve()
        total += found if found is not None else _welfare_milp(part_blocks, part_jobs)
    return max(0.0, total)


# the welfare search hands its component to the MILP when a layer keeps more states than this
# (memory: a state is a row of capped hours per job; a layer's candidates are a few times more)
_WELFARE_MAX_STATES = 500_000
# (beam width, most states kept over all layers) of each round of the search: a beam's plan is
# the pruning floor of the exact pass after it; a pass past its work budget (time: some µs a
# state) starts the next round, and the last one's ends in the MILP
_WELFARE_ROUNDS = ((256, 300_000), (4096, 2_000_000))
# past this many states a layer, the exact search adds the knapsack bound (dearer, much tighter)
_WELFARE_KNAPSACK_FROM = 4096
# memory: a layer is not expanded when it could yield more candidates than this (states times one
# plus the jobs the block fits; generated worlds peak near 2.6 million), and the knapsack bound is
# taken this many states at a time (its work arrays are several times states x jobs floats)
_WELFARE_MAX_CANDIDATES = 4_000_000
_WELFARE_CHUNK = 65_536
# states are packed into one int64 key while the product of the per-job radixes stays below this
_WELFARE_PACK_LIMIT = 2**62
# slack of every pruning test: far above the rounding of these sums, far below the 1e-6 tolerance
_WELFARE_EPS = 1e-7


def _welfare_components(blocks: list[Block], jobs: list[Job]) -> list[tuple[list[Block], list[Job]]]:
    """Independent sub-problems: jobs are linked when one block fits both. Blocks that fit no job
    are left out (they change no welfare), and so are jobs no block fits (they can earn nothing)."""
    parent = list(range(len(jobs)))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    placed: list[tuple[Block, int]] = []
    for b in blocks:
        fit = [k for k, j in enumerate(jobs) if block_fits(b, j)]
        if not fit:
            continue
        for k in fit[1:]:
            parent[root(k)] = root(fit[0])
        placed.append((b, fit[0]))
    groups: dict[int, tuple[list[Block], list[Job]]] = {}
    for b, k in placed:
        groups.setdefault(root(k), ([], []))[0].append(b)
    for k, j in enumerate(jobs):
        if root(k) in groups:
            groups[root(k)][1].append(j)
    return list(groups.values())


class _WelfareSearch:
    """The exact welfare optimum of one component, by a dynamic program over blocks with bounds.

    Blocks are taken largest first. A state is every job's valid hours capped at its requirement
    (hours past it never count), keeping the least energy that reaches it; that much is the same
    exact program as the per-lab :func:`_dp`. What makes it fast for a whole world is pruning:
    a state is dropped when an upper bound on every welfare it can still reach is below a
    welfare already known to be feasible (``floor``), so no state that could reach the optimum
    is ever dropped and the result is exact. The floor comes from the same program run as a
    beam (the best states a layer by the bounds); it is usually the optimum itself.

    Upper bounds on what the blocks after layer ``k`` can still add to a state:

    * Lagrangian (every state): the remaining blocks may each serve several jobs, paying a
      price λ per use, and Σλ over them is added back. Jobs are then independent, and each
      job's best from layer ``k`` on is a table over its hours (``lag``), so the bound is one
      lookup per job. Any λ ≥ 0 is valid; the duals of the LP relaxation make it tight.
    * Knapsack (from crowded layers on, and to rank the beam): the Lagrangian bound lets every
      job count the same few blocks; but the remaining blocks hold ``rest[k]`` hours in all, and
      blocks given to different jobs are distinct. A job's gain (with the same λ) from ``x``
      more hours (exact subset sums of its fitting blocks) lies under a line through the origin
      capped at its best gain; a fractional knapsack of those lines within ``rest[k]`` hours
      bounds every plan.

    Bounded above by ``_WELFARE_MAX_STATES`` states a layer and ``_WELFARE_MAX_CANDIDATES``
    candidates from one layer (memory); past either :meth:`solve` returns None.
    """

    def __init__(self, blocks: list[Block], jobs: list[Job]) -> None:
        fits = [[block_fits(b, j) for j in jobs] for b in blocks]
        # big blocks first: the last layers then hold small blocks, where the bounds are tight
        order = sorted(range(len(blocks)), key=lambda i: (-blocks[i].hours, -sum(fits[i]), i))
        n = len(blocks)
        self.n, self.nj = n, len(jobs)
        self.fits = np.array([fits[i] for i in order], dtype=bool).reshape(n, len(jobs))
        self.hours = [blocks[i].hours for i in order]
        self.energy = [blocks[i].energy_cost * blocks[i].hours for i in order]
        self.req = [j.gpu_hours_required for j in jobs]
        self.value = [j.value for j in jobs]
        self.pc = [j.partial_credit for j in jobs]
        vals = [np.array([job_value(j.value, j.gpu_hours_required, j.partial_credit, h)
                          for h in range(j.gpu_hours_required + 1)]) for j in jobs]
        # every job's table for one layer side by side: one gather at hours + offset reads them all
        self.offset = np.cumsum([0] + [r + 1 for r in self.req[:-1]]).astype(np.int64)
        self.vals = np.concatenate(vals)
        self.rest = np.concatenate([np.cumsum(self.hours[::-1])[::-1], [0]]).astype(np.float64)
        radix = [r + 1 for r in self.req]
        # int16 rows while capped hours plus one more block cannot overflow them (half the memory)
        self.dtype = np.dtype(np.int16 if max(self.req) + max(self.hours, default=0) < 2**15 else np.int64)
        self.req_arr = np.array(self.req, dtype=self.dtype)
        self.mult: np.ndarray | None = None
        if float(np.prod(np.array(radix, dtype=np.float64))) < _WELFARE_PACK_LIMIT:
            self.mult = np.cumprod([1, *radix[:-1]]).astype(np.int64)
        self.lam = self._duals()
        self.lam_rest = np.concatenate([np.cumsum(self.lam[::-1])[::-1], [0.0]])
        self.lag = self._lagrangian_tables(vals)
        self._knap: tuple[np.ndarray, np.ndarray] | None = None
        self._vals_list = vals

    def _duals(self) -> np.ndarray:
        """λ: the duals of "a block serves at most one job" in the LP relaxation of the MILP."""
        from scipy.optimize import linprog
        from scipy.sparse import coo_array

        n, nj = self.n, self.nj
        pairs = np.argwhere(self.fits)
        nx = len(pairs)
        nv = nx + 2 * nj
        c = np.zeros(nv)
        rows: list[int] = []
        cols: list[int] = []
        data: list[float] = []
        for col, (i, k) in enumerate(pairs.tolist()):
            c[col] = self.energy[i]
            cap = float(min(self.hours[i], self.req[k]))
            rows += [i, n + 2 * k, n + 2 * k + 1]
            cols += [col, col, col]
            data += [1.0, -cap, -cap]
        upper = np.ones(nv)
        for k in range(nj):
            r = self.req[k]
            c[nx + k] = -(1.0 - self.pc[k]) * self.value[k]  # completes
            c[nx + nj + k] = -self.pc[k] * self.value[k] / r  # per hour of partial credit
            rows += [n + 2 * k, n + 2 * k + 1]
            cols += [nx + k, nx + nj + k]
            data += [float(r), 1.0]
            upper[nx + nj + k] = r
        a = coo_array((data, (rows, cols)), shape=(n + 2 * nj, nv)).tocsr()
        b = np.concatenate([np.ones(n), np.zeros(2 * nj)])
        with _quiet_native_output():
            res = linprog(c, A_ub=a, b_ub=b, bounds=np.stack([np.zeros(nv), upper], axis=1), method="highs")
        if res.status != 0:  # pragma: no cover - bounded and feasible (all zero); zero λ stays valid
            return np.zeros(n)
        return np.maximum(-np.asarray(res.ineqlin.marginals[:n], dtype=np.float64), 0.0)

    def _lagrangian_tables(self, vals: list[np.ndarray]) -> np.ndarray:
        """lag[k, offset[j] + h]: job j's best value from hours h plus a subset of blocks k..,
        less their energy and λ (every block free to it)."""
        out = []
        for j, r in enumerate(self.req):
            tab = np.empty((self.n + 1, r + 1))
            tab[self.n] = vals[j]
            h = np.arange(r + 1)
            for i in range(self.n - 1, -1, -1):
                tab[i] = tab[i + 1]
                if self.fits[i, j]:
                    take = tab[i + 1][np.minimum(h + self.hours[i], r)] - self.energy[i] - self.lam[i]
                    np.maximum(tab[i], take, out=tab[i])
            out.append(tab)
        return np.concatenate(out, axis=1)

    def _knapsack_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """(slope, length)[k, offset[j] + h]: the line through the origin that bounds job j's gain
        from hours h on with more hours of its fitting blocks k.. (energy and λ paid)."""
        if self._knap is None:
            width = int(self.offset[-1]) + self.req[-1] + 1
            slope = np.zeros((self.n + 1, width))
            length = np.zeros((self.n + 1, width))
            for j, r in enumerate(self.req):
                val = self._vals_list[j]
                h = np.arange(r + 1)
                total = sum(self.hours[i] for i in range(self.n) if self.fits[i, j])
                cost = np.full(total + 1, np.inf)  # least energy + λ of exactly x hours of blocks k..
                cost[0] = 0.0
                cols = slice(int(self.offset[j]), int(self.offset[j]) + r + 1)
                for i in range(self.n, -1, -1):
                    if i < self.n and self.fits[i, j]:
                        x = self.hours[i]
                        cost[x:] = np.minimum(cost[x:], cost[:-x] + (self.energy[i] + self.lam[i]))
                    xs = np.nonzero(np.isfinite(cost[1:]))[0] + 1
                    if not len(xs):
                        continue
                    gain = val[np.minimum(h[:, None] + xs[None, :], r)] - val[:, None] - cost[xs][None, :]
                    best = gain.max(axis=1)
                    s = (gain / xs[None, :]).max(axis=1)
                    ok = (s > 0) & (best > 0)
                    slope[i, cols] = np.where(ok, s, 0.0)
                    length[i, cols] = np.where(ok, best / np.where(ok, s, 1.0), 0.0)
            self._knap = (slope, length)
        return self._knap

    def _knapsack_bound(self, k: int, idx: np.ndarray, f: np.ndarray) -> np.ndarray:
        """The knapsack bound after layer k of the states whose gather indexes are ``idx``."""
        slope_t, length_t = self._knapsack_tables()
        s = slope_t[k][idx]
        ln = length_t[k][idx]
        o = np.argsort(-s, axis=1)
        s = np.take_along_axis(s, o, axis=1)
        ln = np.take_along_axis(ln, o, axis=1)
        before = np.cumsum(ln, axis=1) - ln
        gain = (s * np.clip(self.rest[k] - before, 0.0, ln)).sum(axis=1)
        return f + self.vals[idx].sum(axis=1) + gain + self.lam_rest[k]

    def _expand(self, i: int, hm: np.ndarray, f: np.ndarray,
                cut: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The states after block i: each state with block i unused or given to a job it fits,
        those whose Lagrangian bound reaches ``cut``, one per hours vector (the one that paid the
        least energy). Returns (hours, −energy, bound, parent row, job of block i or −1)."""
        k = i + 1
        req = self.req_arr
        # each state's Lagrangian bound per job after block i, with block i left unused
        lag = self.lag[k][hm + self.offset]
        base = f + self.lam_rest[k] + lag.sum(axis=1)
        rows = np.nonzero(base >= cut)[0]
        parts = [(hm[rows], f[rows], base[rows], rows, -1)]
        for j in np.nonzero(self.fits[i])[0]:
            rows = np.nonzero(hm[:, j] < req[j])[0]
            hj = np.minimum(hm[rows, j] + self.hours[i], req[j])
            ub = base[rows] - lag[rows, j] + self.lag[k][hj + self.offset[j]] - self.energy[i]
            ok = ub >= cut
            rows = rows[ok]
            grown = hm[rows]
            grown[:, j] = hj[ok]
            parts.append((grown, f[rows] - self.energy[i], ub[ok], rows, int(j)))
        hm = np.concatenate([p[0] for p in parts])
        f = np.concatenate([p[1] for p in parts])
        ub = np.concatenate([p[2] for p in parts])
        parent = np.concatenate([p[3] for p in parts])
        job = np.concatenate([np.full(len(p[3]), p[4]) for p in parts])
        if self.mult is not None:
            code = hm @ self.mult
            o = np.lexsort((-f, code))
            first = np.ones(len(o), dtype=bool)
            first[1:] = code[o[1:]] != code[o[:-1]]
            sel = o[first]
        else:
            o = np.argsort(-f, kind="stable")
            sel = o[np.unique(hm[o], axis=0, return_index=True)[1]]
        return hm[sel], f[sel], ub[sel], parent[sel], job[sel]

    def _start(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((1, self.nj), dtype=self.dtype), np.zeros(1)

    def _beam(self, width: int) -> list[int]:
        """A good feasible plan: the program keeping the best ``width`` states a layer by the
        tighter of both bounds. Returns the job of each block (−1: unused)."""
        hm, f = self._start()
        trail: list[tuple[np.ndarray, np.ndarray]] = []
        for i in range(self.n):
            hm, f, ub, parent, job = self._expand(i, hm, f, -np.inf)
            if len(f) > width:
                ub = np.minimum(ub, self._knapsack_bound(i + 1, hm + self.offset, f))
                top = np.argpartition(-ub, width)[:width]
                hm, f, parent, job = hm[top], f[top], parent[top], job[top]
            trail.append((parent, job))
        row = int(np.argmax(f + self.vals[hm + self.offset].sum(axis=1)))
        plan = [-1] * self.n
        for i in range(self.n - 1, -1, -1):
            plan[i] = int(trail[i][1][row])
            row = int(trail[i][0][row])
        return plan

    def _improve(self, plan: list[int]) -> float:
        """Local search from ``plan``: move one block to another job (or to none) or swap two
        blocks' jobs while that raises the welfare. Returns the welfare reached (a feasible one)."""
        raw = [0] * self.nj  # uncapped hours per job
        for i, j in enumerate(plan):
            if j >= 0:
                raw[j] += self.hours[i]

        def value(j: int, hours: int) -> float:
            return float(self._vals_list[j][min(hours, self.req[j])])

        options = [[-1, *np.nonzero(self.fits[i])[0].tolist()] for i in range(self.n)]
        improved = True
        while improved:
            improved = False
            for i in range(self.n):
                j, h = plan[i], self.hours[i]
                for j2 in options[i]:
                    if j2 == j:
                        continue
                    gain = (value(j2, raw[j2] + h) - value(j2, raw[j2]) - self.energy[i]) if j2 >= 0 else 0.0
                    loss = (value(j, raw[j]) - value(j, raw[j] - h) - self.energy[i]) if j >= 0 else 0.0
                    if gain - loss > _WELFARE_EPS:
                        if j >= 0:
                            raw[j] -= h
                        if j2 >= 0:
                            raw[j2] += h
                        plan[i], j, improved = j2, j2, True
            for i in range(self.n):
                for i2 in range(i + 1, self.n):
                    j, j2 = plan[i], plan[i2]
                    if j == j2 or j < 0 or j2 < 0 or not (self.fits[i, j2] and self.fits[i2, j]):
                        continue
                    d = self.hours[i2] - self.hours[i]  # job j gains d hours, job j2 loses them
                    if d == 0:
                        continue
                    delta = (value(j, raw[j] + d) - value(j, raw[j])
                             + value(j2, raw[j2] - d) - value(j2, raw[j2]))
                    if delta > _WELFARE_EPS:
                        raw[j] += d
                        raw[j2] -= d
                        plan[i], plan[i2], improved = j2, j, True
        spent = sum(self.energy[i] for i, j in enumerate(plan) if j >= 0)
        return sum(value(j, raw[j]) for j in range(self.nj)) - spent

    def _exact(self, floor: float, max_work: int) -> float | None:
        """The best welfare of any state whose bounds reach ``floor`` (``floor`` itself when no
        state does; None past ``_WELFARE_MAX_STATES`` states a layer, ``_WELFARE_MAX_CANDIDATES``
        candidates or ``max_work`` states in all)."""
        hm, f = self._start()
        cut = floor - _WELFARE_EPS
        knapsack = False
        work = 0
        for i in range(self.n):
            if len(f) * (1 + int(self.fits[i].sum())) > _WELFARE_MAX_CANDIDATES:
                return None
            hm, f, _ub, _parent, _job = self._expand(i, hm, f, cut)
            knapsack = knapsack or len(f) > _WELFARE_KNAPSACK_FROM
            if knapsack and len(f):
                alive = np.concatenate([
                    self._knapsack_bound(i + 1, hm[a:a + _WELFARE_CHUNK] + self.offset, f[a:a + _WELFARE_CHUNK]) >= cut
                    for a in range(0, len(f), _WELFARE_CHUNK)])
                hm, f = hm[alive], f[alive]
            work += len(f)
            if len(f) > _WELFARE_MAX_STATES or work > max_work:
                return None
        if not len(f):
            return floor
        return max(floor, float((f + self.vals[hm + self.offset].sum(axis=1)).max()))

    def solve(self) -> float | None:
        """The exact optimum welfare of the component (None: over the state budget).

        A narrow beam's plan is usually optimal, and then the exact pass is cheap; when that
        pass runs long it is restarted from a wider beam's plan (a higher floor prunes more)."""
        floor = -np.inf
        for width, work in _WELFARE_ROUNDS:
            floor = max(floor, self._improve(self._beam(width)))
            found = self._exact(floor, work)
            if found is not None:
                return found
        return None


def _welfare_milp(blocks: Sequence[Block], jobs: Sequence[Job]) -> float:
    """The welfare optimum as a MILP solved by HiGHS (the fallback of :func:`social_optimum`).

    Variables: x[b,j] (block b runs for job j), y[j] (job j completes) and p[j] (hours counted
    for partial credit); ``jobs`` must all need hours (``gpu_hours_required > 0``).
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    usable = [b for b in blocks if b.status not in (BlockStatus.FAILED,)]
    pairs = [(bi, ji) for bi, b in enumerate(usable) for ji, j in enumerate(jobs)
             if block_fits(b, j) and j.value > 0]
    if not pairs or not jobs:
        return 0.0
    nx, nj = len(pairs), len(jobs)
    n = nx + 2 * nj
    c = np.zeros(n)
    for k, (bi, _ji) in enumerate(pairs):
        b = usable[bi]
        c[k] = b.energy_cost * b.hours
    for ji, j in enumerate(jobs):
        c[nx + ji] = -(1.0 - j.partial_credit) * j.value
        c[nx + nj + ji] = -j.partial_credit * j.value / j.gpu_hours_required
    rows: list[np.ndarray] = []
    lo: list[float] = []
    hi: list[float] = []
    for bi in range(len(usable)):
        row = np.zeros(n)
        for k, (b2, _j) in enumerate(pairs):
            if b2 == bi:
                row[k] = 1.0
        rows.append(row)
        lo.append(-np.inf)
        hi.append(1.0)
    for ji, j in enumerate(jobs):
        supply = np.zeros(n)
        for k, (bi, j2) in enumerate(pairs):
            if j2 == ji:
                # capped at the requirement: hours past it never count (a tighter, equivalent row)
                supply[k] = min(usable[bi].hours, j.gpu_hours_required)
        done = supply.copy()
        done[nx + ji] = -j.gpu_hours_required
        rows.append(done)
        lo.append(0.0)
        hi.append(np.inf)
        part = supply.copy()
        part[nx + nj + ji] = -1.0
        rows.append(part)
        lo.append(0.0)
        hi.append(np.inf)
        # valid cut: an optimum never assigns a block a job could do without, so a job's hours
        # overshoot its requirement by less than its largest compatible block
        biggest = max((usable[bi].hours for bi, j2 in pairs if j2 == ji), default=0)
        raw = np.zeros(n)
        for k, (bi, j2) in enumerate(pairs):
            if j2 == ji:
                raw[k] = usable[bi].hours
        rows.append(raw)
        lo.append(-np.inf)
        hi.append(float(j.gpu_hours_required - 1 + biggest))
    integrality = np.concatenate([np.ones(nx), np.ones(nj), np.zeros(nj)])
    upper = np.concatenate([np.ones(nx + nj), np.array([float(j.gpu_hours_required) for j in jobs])])
    with _quiet_native_output():
        # a zero gap: HiGHS's default (1e-4 relative) stops short of the optimum on some worlds
        # (coalition_market train seed 49: 686.004 against 686.064)
        res = milp(c, constraints=LinearConstraint(np.array(rows), lo, hi), integrality=integrality,
                   bounds=Bounds(np.zeros(n), upper), options={"mip_rel_gap": 0.0})
    if res.status != 0 or res.x is None:  # pragma: no cover - HiGHS solves these small bounded MILPs
        raise RuntimeError(f"welfare MILP failed: {res.message}")
    return max(0.0, float(-res.fun))
