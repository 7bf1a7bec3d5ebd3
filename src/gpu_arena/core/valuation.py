"""Valuation: a lab's best allocation of its blocks to its jobs, its potential, and the welfare optimum.

The same functions price everything: the reward's potential, the seat's decision aids, the
opponents' offer valuations and the final settlement. ``best_allocation`` is an exact dynamic
program over blocks whose state is the capped hours per job (capping is exact because a job's
value stops growing at its requirement). ``social_optimum`` is an exact MILP solved by HiGHS.
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
Parents = tuple[dict[int, tuple[int, int]], ...]  # per block: state -> (previous state, job or -1)


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
        nxt = dict(frontier)
        par = {s: (s, -1) for s in frontier}
        for state, neg_e in frontier.items():
            ne = neg_e - energy
            for k, mult, r, cap in options:
                h = state // mult % r
                if h >= cap:
                    continue
                nh = h + hours
                ns = state + ((cap if nh > cap else nh) - h) * mult  # capped: hours past the need never count
                if ns not in nxt or ne > nxt[ns] + 1e-12:
                    nxt[ns] = ne
                    par[ns] = (state, k)
        frontier = nxt
        parents.append(par)
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
            prev, k = self.parents[i][state]
            choices[i] = k
            state = prev
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

    def extra_prices(self, blocks: Sequence[Block]) -> list[tuple[float, str | None]]:
        """For each of ``blocks`` (all starting after this round): ``net(extra=[b])`` and
        ``job_for(b)``, priced together (see :func:`with_extras`)."""
        if not self.jobs:
            return [(0.0, None)] * len(blocks)
        prices = with_extras(self.block_keys, self.job_keys, [_block_key(b) for b in blocks], self.budget)
        return [(best, self.jobs[k].job_id if k >= 0 else None) for best, k in prices]

    def nets_without_each(self) -> list[float]:
        """``net(without=(b.block_id,))`` for each of this lab's plannable blocks, in order."""
        if not self.jobs:
            return [0.0] * len(self.blocks)
        keys, budget = self.block_keys, max(0.0, self.budget + 0.0)
        out = []
        for i in range(len(keys)):
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
    Solved as a MILP with HiGHS; variables are x[b,j] (block b runs for job j), y[j] (job j
    completes) and p[j] (hours counted for partial credit).
    """
    import numpy as np
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
        res = milp(c, constraints=LinearConstraint(np.array(rows), lo, hi), integrality=integrality,
                   bounds=Bounds(np.zeros(n), upper))
    if res.status != 0 or res.x is None:  # pragma: no cover - HiGHS solves these small bounded MILPs
        raise RuntimeError(f"welfare MILP failed: {res.message}")
    return max(0.0, float(-res.fun))
