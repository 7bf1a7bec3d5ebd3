"""The allocation dynamic program: a lab's best use of its blocks for its jobs, on packed keys.

Blocks and jobs enter as plain tuples (:data:`BlockKey`, :data:`JobKey`) so results can be cached
by value. :func:`solve` is an exact dynamic program over blocks whose state is the capped hours per
job (capping is exact because a job's value stops growing at its requirement); a solved
:class:`Frontier` also prices one more block, or many (:func:`with_extras`), without solving
again. :mod:`gpu_arena.core.valuation` builds a lab's plans and potential on it, and
:mod:`gpu_arena.core.welfare` the planner's greedy allocation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

# the DP and the what-if scans (their Rust twin: native/src/kernels.rs)
from . import kernels
from .kernels import BlockKey, JobKey, job_value

INF = kernels.INF


class Frontier:
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

    __slots__ = ("_arrays", "_columns", "_groups", "_states", "_vals", "base", "codes", "extras", "jobs", "max_energy",
                 "neg_e", "parents", "radix", "solved")

    def __init__(self, blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...]) -> None:
        self.jobs = jobs
        self.radix, self.codes, self.neg_e, self.parents, base = kernels.solve_frontier(blocks, jobs)
        self._columns: list[list[int]] | None = None
        self._states: tuple[tuple[int, ...], ...] | None = None
        self._vals: tuple[tuple[float, ...], ...] | None = None
        # each state's value, job by job from zero as sum() adds them (no jobs: the int 0 of sum())
        self.base = tuple(base) if jobs else (0,) * len(self.codes)
        self.max_energy = -min(self.neg_e)
        self.solved: dict[float, tuple[float, float, tuple[int, ...]]] = {}
        self.extras: dict[tuple[BlockKey, float], tuple[float, int]] = {}
        self._arrays: tuple[np.ndarray, ...] | None = None
        self._groups: _Groups | None = None

    @property
    def columns(self) -> list[list[int]]:
        """Each job's hours in every state, in frontier order (:attr:`states` by job)."""
        if self._columns is None:
            self._columns = [[code // mult % r for code in self.codes] for mult, r in self.radix]
        return self._columns

    @property
    def states(self) -> tuple[tuple[int, ...], ...]:
        """Each state's hours per job, in frontier order."""
        if self._states is None:
            self._states = tuple(zip(*self.columns, strict=True)) if self.jobs else ((),) * len(self.codes)
        return self._states

    def _value_columns(self) -> list[list[float]]:
        """Each job's value in every state (a job's value depends on its own hours only, so each
        (job, hours) pair is evaluated once)."""
        out = []
        for j, column in zip(self.jobs, self.columns, strict=True):
            table = {h: job_value(j[4], j[0], j[5], h) for h in set(column)}
            out.append([table[h] for h in column])
        return out

    @property
    def vals(self) -> tuple[tuple[float, ...], ...]:
        """Each state's value per job."""
        if self._vals is None:
            self._vals = tuple(zip(*self._value_columns(), strict=True)) if self.jobs else ((),) * len(self.codes)
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
        best_i, choices = kernels.best_plan(self.codes, self.neg_e, self.base, self.parents, len(self.jobs), budget)
        assert best_i >= 0  # assigning nothing costs nothing and is always in the frontier
        best_value = self.base[best_i]  # the sum itself (the int 0 where there are no jobs), as the scan kept it
        best_total = best_value + self.neg_e[best_i]
        out = self.solved[budget] = (best_value, best_value - best_total, choices)
        return out

    @property
    def has_arrays(self) -> bool:
        """Whether :meth:`arrays` has been built."""
        return self._arrays is not None

    def arrays(self) -> tuple[np.ndarray, ...]:
        """(states, neg_e, vals, base) as arrays, built on first use."""
        if self._arrays is None:
            n, n_jobs = len(self.states), len(self.jobs)
            self._arrays = (np.array(self.states, dtype=np.int64).reshape(n, n_jobs),
                            np.array(self.neg_e, dtype=np.float64),
                            np.array(self.vals, dtype=np.float64).reshape(n, n_jobs),
                            np.array(self.base, dtype=np.float64))
        return self._arrays

    def groups(self) -> _Groups:
        """The frontier summarised for pricing extra blocks under a budget that binds no state.

        A candidate of the what-if scan is "state s, no job" (worth base + neg_e) or "state s,
        job k" (worth base + gain + neg_e − energy, where the gain depends on the block and on s's
        hours for job k alone). So among the states with the same hours for job k only the one with
        the largest base + neg_e can win for job k: per job and hours, the top (its value and first
        state) and the runner-up value; the same for "no job" over all states. ``scale`` bounds the
        magnitudes, for :func:`_grouped`'s rounding argument.
        """
        if self._groups is None:
            nojob, per_job = kernels.frontier_groups(self.jobs, self.columns, self.base, self.neg_e)
            scale = max([abs(x) for x in self.base] + [abs(x) for x in self.neg_e] + [abs(j[4]) for j in self.jobs])
            self._groups = (nojob, per_job, scale)
        return self._groups


# (top, its first state, runner-up) for "no job"; per job, one row per hours h of its groups: (h,
# the top's first state i, the runner-up's value, the job's value at h, base[i], neg_e[i]); the
# largest magnitude
_Groups = tuple[tuple[float, int, float], tuple[tuple[tuple[int, int, float, float, float, float], ...], ...], float]
# how far below the best every other candidate must lie for the grouped answer to be the scan's
_CLEAR = 1e-9


def _grouped(fr: Frontier, extra: BlockKey, budget: float) -> tuple[float, int] | None:
    """:func:`_scan_extra` under a budget that binds no state (``budget`` is ∞, see
    :meth:`Frontier.budget_for`), from :meth:`Frontier.groups`: one candidate per (job, hours)
    group instead of one per state, or None where it cannot be sure or the budget binds.

    The scan keeps a candidate only if it beats the best so far by more than 1e-12, so its answer
    is the first candidate of the largest value provided that every candidate of another value lies
    clearly below it (:data:`_CLEAR`). The winner's value is computed by the scan's own expression
    on its own state, so it is the same float; exact ties go to the candidate the scan meets first;
    candidates hidden behind a group's top are bounded by the runner-up's value (within rounding,
    far below :data:`_CLEAR` at magnitudes under 1e5). A near-tie returns None: the caller scans.
    """
    if budget != INF:
        return None
    nojob, per_job, scale = fr.groups()
    if scale > 1e5 or abs(extra[3]) > 1e5:
        return None
    return kernels.grouped_extra(fr.jobs, nojob, per_job, extra, _CLEAR)


# Frontiers are reused within a few rounds of one episode (a lab whose holdings did not change),
# never across episodes. An episode keeps its own (:class:`FrontierCache`); this shared cache
# serves the rest (the rules' own valuations, planners) and hands an episode what another
# valuation of the same step just solved. A large shared cache gains no hit and keeps thousands of
# frontiers alive, whose memo tables the garbage collector then walks (decision 0021, step 15).
_FRONTIER_CACHE = 128
_EPISODE_CACHE = 256


@lru_cache(maxsize=_FRONTIER_CACHE)
def _frontier(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...]) -> Frontier:
    return Frontier(blocks, jobs)


class FrontierCache:
    """The frontiers one episode has solved, by (blocks, jobs), least recently used dropped past
    ``maxsize``; a miss asks the shared cache. One per episode: it lives and dies with the
    episode, so concurrent episodes (a server's sessions) never evict each other's frontiers."""

    __slots__ = ("get",)

    def __init__(self, maxsize: int = _EPISODE_CACHE) -> None:
        self.get: Callable[[tuple[BlockKey, ...], tuple[JobKey, ...]], Frontier] = lru_cache(maxsize=maxsize)(_frontier)


def frontier(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...], cache: FrontierCache | None = None) -> Frontier:
    """The solved DP of ``blocks`` for ``jobs`` (cached by value: in ``cache`` if given, else the
    shared cache): a caller that asks several questions of the same pair keeps it, rather than
    hashing both key tuples for each."""
    return _frontier(blocks, jobs) if cache is None else cache.get(blocks, jobs)


def solve(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...],
           budget: float = INF) -> tuple[float, float, tuple[int, ...]]:
    """Exact best assignment whose energy fits ``budget``: (value, energy, job index per block or -1)."""
    return _frontier(blocks, jobs).solve(budget)


def with_extra(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...], extra: BlockKey,
                budget: float) -> tuple[float, int]:
    """Best value − energy with one more block, from the cached frontier of ``blocks``, and the
    job index the extra block serves in that best plan (-1: it serves none). Memoised per frontier;
    :func:`with_extras` prices many blocks at once with the same results."""
    return extra_price(_frontier(blocks, jobs), extra, budget)


def extra_price(fr: Frontier, extra: BlockKey, budget: float) -> tuple[float, int]:
    """:func:`with_extra` on a frontier already at hand (:func:`frontier`)."""
    key = (extra, fr.budget_for(budget, extra[3]))
    hit = fr.extras.get(key)
    if hit is None:
        hit = _grouped(fr, extra, key[1]) or _scan_extra(fr, extra, key[1])
        fr.extras[key] = hit
    return hit


def _scan_extra(fr: Frontier, extra: BlockKey, budget: float) -> tuple[float, int]:
    """The scalar what-if: scan the frontier once for the best use of one more block."""
    return kernels.scan_extra(fr.jobs, fr.states, fr.neg_e, fr.vals, fr.base, extra, budget)


# below this many (state, extra block, job) triples a batch is priced by the scalar scan; building
# a frontier's arrays costs about as much as scanning 4,000 candidates, so a frontier without them
# yet must have a larger batch to pay for them (decision 0021, step 15)
_BATCH_MIN = 256
_BATCH_MIN_NEW_ARRAYS = 4096


def with_extras(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...], extras: Sequence[BlockKey],
                budget: float) -> list[tuple[float, int]]:
    """:func:`with_extra` for many extra blocks at once, with exactly its results.

    Large batches are priced in one array pass over the frontier: the candidates are laid out in
    the scalar scan's order (state by state: no job, then each job) and its "better by more than
    1e-12" rule is replayed with a running maximum; a row where that rule could pick another
    near-tie (a candidate within 1e-12 above the best so far) is re-scanned by the scalar rule.
    """
    return extra_prices(_frontier(blocks, jobs), extras, budget)


def extra_prices(fr: Frontier, extras: Sequence[BlockKey], budget: float) -> list[tuple[float, int]]:
    """:func:`with_extras` on a frontier already at hand (:func:`frontier`)."""
    jobs = fr.jobs
    keys = [(e, fr.budget_for(budget, e[3])) for e in extras]
    missing = [k for k in dict.fromkeys(keys) if k not in fr.extras]
    unsure = []
    for key in missing:
        hit = _grouped(fr, *key)
        if hit is None:
            unsure.append(key)
        else:
            fr.extras[key] = hit
    missing = unsure
    if missing:
        if (len(missing) * len(fr.states) * max(1, len(jobs))
                < (_BATCH_MIN if fr.has_arrays else _BATCH_MIN_NEW_ARRAYS)):
            for key in missing:
                fr.extras[key] = _scan_extra(fr, key[0], key[1])
        else:
            for b in {k[1] for k in missing}:
                group = [k for k in missing if k[1] == b]
                fr.extras.update(zip(group, _price_extras(fr, [k[0] for k in group], b), strict=True))
    return [fr.extras[k] for k in keys]


def _price_extras(fr: Frontier, extras: list[BlockKey], budget: float) -> list[tuple[float, int]]:
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
