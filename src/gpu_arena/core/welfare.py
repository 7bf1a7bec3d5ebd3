"""The welfare optimum: the most a perfect planner gets out of a world's blocks and jobs.

:func:`social_optimum` is the allocation program over a whole world, split into independent
components and pruned by Lagrangian and knapsack bounds (exact; a MILP solved by HiGHS is its
fallback). :func:`greedy_allocation` is the planner's fast feasible allocation, a lower bound used
to accept generated worlds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .allocation import job_value, solve
from .milp import quiet_native_output, welfare_milp
from .sums import ordered_sum
from .types import Block, BlockStatus, Job
from .valuation import block_fits, block_key


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
        value, energy, choices = solve(tuple(block_key(b) for b in fit), key)  # no budget: a planner's bound
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


def social_optimum(blocks: Sequence[Block], jobs: Sequence[Job]) -> float:
    """Exact maximum of Σ job value − Σ energy over all assignments of ``blocks`` to ``jobs``.

    Ownership and timing of trades are ignored: it is the welfare a perfect planner reaches.
    Failed blocks and jobs worth nothing take no part; a job that needs no hours is worth its
    value. The blocks and jobs split into independent components (jobs linked by a block that
    fits both), each solved by :class:`_WelfareSearch`, an exact search over blocks; a component
    whose search outgrows its memory budget is solved by the MILP :func:`welfare_milp` instead.
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
        total += found if found is not None else welfare_milp(part_blocks, part_jobs)
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
        order = sorted(range(len(blocks)), key=lambda i: (-blocks[i].hours, -sum(fits[i]), i))  # int sum: of bools
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
        with quiet_native_output():
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
                total = sum(self.hours[i] for i in range(self.n) if self.fits[i, j])  # int sum: GPU-hours
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
        spent = ordered_sum(self.energy[i] for i, j in enumerate(plan) if j >= 0)
        return ordered_sum(value(j, raw[j]) for j in range(self.nj)) - spent

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
