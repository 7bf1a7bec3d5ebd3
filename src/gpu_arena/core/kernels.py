"""The allocation DP's inner loops: the Python core's, and the specification of their Rust twin.

:mod:`gpu_arena.core.allocation` calls these: the DP over blocks, the frontier's build, the best
plan's scan and parent walk, the frontier's groups and the two what-if prices. The Rust engine
(``native/src/kernels.rs``, decision 0026) mirrors them function by function, with the same IEEE
operations in the same order, and ``tests/native`` compares the two bit for bit. (A mypyc build of
this module, decision 0024, was removed by decision 0029: the Rust engine is the one accelerator.)

The functions take and return plain tuples, lists, dicts, ints and floats only (no classes of
the project), and every local is typed where it is first bound.
"""

from __future__ import annotations

# (hours, end_round, reliability, energy_total)
BlockKey = tuple[int, int, float, float]
# (required, fixed_hours, deadline, min_reliability, value (share-weighted), partial_credit)
JobKey = tuple[int, int, int, float, float, float]
# per job, one row per hours h of its groups: (h, the top's first state, the runner-up's value,
# the job's value at h, base of that state, neg_e of that state); see allocation.Frontier.groups
GroupRow = tuple[int, int, float, float, float, float]

INF = float("inf")


def job_value(value: float, required: int, partial_credit: float, hours: float) -> float:
    """Value of a job given the valid hours assigned to it (whole hours in every use; a float
    ``hours`` gives the same float an int of the same value does)."""
    if hours >= required:
        return value
    if partial_credit <= 0.0 or hours <= 0:
        return 0.0
    return value * partial_credit * hours / required


def radix(jobs: tuple[JobKey, ...]) -> tuple[tuple[int, int], ...]:
    """(multiplier, radix) of each job's digit in a packed state: job k's capped hours times the
    product of (requirement + 1) of the jobs before it."""
    out: list[tuple[int, int]] = []
    mult = 1
    for job in jobs:
        r: int = max(job[0], 0) + 1
        out.append((mult, r))
        mult *= r
    return tuple(out)


def solve_frontier(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...]) -> tuple[
        tuple[tuple[int, int], ...], tuple[int, ...], tuple[float, ...], tuple[dict[int, int], ...], list[float]]:
    """Everything a frontier is built from: its radix, its packed states (``codes``) and minus
    their least energies (``neg_e``) in DP order, the parent maps of :func:`dp`, and each state's
    value (:func:`state_values`; empty where there are no jobs)."""
    rad = radix(jobs)
    frontier, parents = dp(blocks, jobs, rad)
    codes = tuple(frontier)
    return rad, codes, tuple(frontier.values()), parents, state_values(codes, jobs, rad) if jobs else []


def best_plan(codes: tuple[int, ...], neg_es: tuple[float, ...], bases: tuple[float, ...],
              parents: tuple[dict[int, int], ...], n_jobs: int, budget: float) -> tuple[int, tuple[int, ...]]:
    """The state of the best plan whose energy fits ``budget`` (the first of the largest value −
    energy, later ones must beat it by more than 1e-12) and the job each block serves in it (-1:
    none), walked back through the parent maps."""
    limit: float = budget + 1e-9
    best_i = -1
    best_total: float = -INF
    for i in range(len(codes)):
        neg_e: float = neg_es[i]
        if -neg_e > limit:
            continue
        total: float = bases[i] + neg_e
        if total > best_total + 1e-12:
            best_i, best_total = i, total
    choices: list[int] = [-1] * len(parents)
    if best_i < 0:
        return best_i, tuple(choices)
    state: int = codes[best_i]
    for b in range(len(parents) - 1, -1, -1):
        step = parents[b].get(state)
        if step is not None:  # else the state came through block b unchanged: it serves no job
            state = step // n_jobs
            choices[b] = step % n_jobs
    return best_i, tuple(choices)


# DP states are the capped valid hours per job, packed into one int (mixed radix, see radix()):
# cheaper to build and hash than tuples. Per block, the parent map holds state -> previous state ×
# (number of jobs) + job for the states that block reached or improved; a state missing from a
# block's map came through it unchanged (the block serves no job on that path). Plain ints: a map
# of ints is never tracked by the garbage collector, one of tuples is.
def dp(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...],
       radix: tuple[tuple[int, int], ...]) -> tuple[dict[int, float], tuple[dict[int, int], ...]]:
    """The allocation DP over ``blocks`` (see :func:`gpu_arena.core.allocation.solve`): packed
    state -> minus the least energy that reaches it, and per block the parent map of the states
    it reached or improved (packed previous state × number of jobs + job).

    Keeping only the least energy per state is exact both for the objective (a plan's value
    depends on its state alone) and for the budget, which is applied to the energy at the end.
    """
    n_jobs = len(jobs)
    start = 0
    for k in range(n_jobs):
        job = jobs[k]
        start += min(job[1], job[0]) * radix[k][0]
    frontier: dict[int, float] = {start: 0.0}
    parents: list[dict[int, int]] = []
    # the jobs a block could serve at all (positive value and requirement), as parallel columns
    u_k: list[int] = []
    u_mult: list[int] = []
    u_r: list[int] = []
    u_req: list[int] = []
    u_deadline: list[int] = []
    u_rel: list[float] = []
    for k in range(n_jobs):
        job = jobs[k]
        if job[4] > 0 and job[0] > 0:
            u_k.append(k)
            u_mult.append(radix[k][0])
            u_r.append(radix[k][1])
            u_req.append(job[0])
            u_deadline.append(job[2])
            u_rel.append(job[3])
    n_usable = len(u_k)
    for block in blocks:
        hours: int = block[0]
        end: int = block[1]
        rel: float = block[2]
        energy: float = block[3]
        o_k: list[int] = []
        o_mult: list[int] = []
        o_r: list[int] = []
        o_cap: list[int] = []
        for x in range(n_usable):
            if end <= u_deadline[x] and rel >= u_rel[x]:
                o_k.append(u_k[x])
                o_mult.append(u_mult[x])
                o_r.append(u_r[x])
                o_cap.append(u_req[x])
        par: dict[int, int] = {}
        parents.append(par)
        n_options = len(o_k)
        if n_options == 0:
            continue  # the block serves no job: every state passes through unchanged
        nxt = dict(frontier)
        for state, neg_e in frontier.items():
            ne: float = neg_e - energy
            for y in range(n_options):
                mult: int = o_mult[y]
                cap: int = o_cap[y]
                h: int = state // mult % o_r[y]
                if h >= cap:
                    continue
                nh: int = h + hours
                ns: int = state + ((cap if nh > cap else nh) - h) * mult  # capped: hours past the need never count
                old = nxt.get(ns)
                if old is None or ne > old + 1e-12:
                    nxt[ns] = ne
                    par[ns] = state * n_jobs + o_k[y]
        frontier = nxt
    return frontier, tuple(parents)


def scan_extra(jobs: tuple[JobKey, ...], states: tuple[tuple[int, ...], ...], neg_es: tuple[float, ...],
               vals: tuple[tuple[float, ...], ...], bases: tuple[float, ...], extra: BlockKey,
               budget: float) -> tuple[float, int]:
    """The best value − energy with one more block, scanning every state of a frontier (its
    ``states``, ``neg_e``, ``vals`` and ``base``), and the job it serves (-1: none): a candidate is
    kept only if it beats the best so far by more than 1e-12."""
    hours: int = extra[0]
    end: int = extra[1]
    rel: float = extra[2]
    energy: float = extra[3]
    fits: list[int] = []
    for k in range(len(jobs)):
        job = jobs[k]
        if end <= job[2] and rel >= job[3] and job[4] > 0 and job[0] > 0:
            fits.append(k)
    n_fits = len(fits)
    limit: float = budget + 1e-9
    best: float = -INF
    choice = -1
    for i in range(len(states)):
        neg_e: float = neg_es[i]
        if -neg_e > limit:
            continue
        base: float = bases[i]
        if base + neg_e > best + 1e-12:
            best, choice = base + neg_e, -1
        if -neg_e + energy > limit:
            continue
        state = states[i]
        for x in range(n_fits):
            k = fits[x]
            job = jobs[k]
            req: int = job[0]
            have: int = state[k]
            if have >= req:
                continue
            nh: int = have + hours
            gain: float = job_value(job[4], req, job[5], nh if nh < req else req) - vals[i][k]
            cand: float = base + gain + neg_e - energy
            if cand > best + 1e-12:
                best, choice = cand, k
    return best, choice


def grouped_extra(jobs: tuple[JobKey, ...], nojob: tuple[float, int, float],
                  per_job: tuple[tuple[GroupRow, ...], ...], extra: BlockKey,
                  clear: float) -> tuple[float, int] | None:
    """:func:`scan_extra`'s answer under a budget that binds no state, from a frontier's groups
    (one candidate per job and hours instead of one per state), or None where another candidate
    lies within ``clear`` of the best (see :func:`gpu_arena.core.allocation._grouped`)."""
    hours: int = extra[0]
    end: int = extra[1]
    rel: float = extra[2]
    energy: float = extra[3]
    best: float = nojob[0]
    first_state: int = nojob[1]  # the best's first candidate: (state, place in the state)
    first_place = 0
    runner: float = nojob[2]
    for k in range(len(jobs)):
        job = jobs[k]
        req: int = job[0]
        value: float = job[4]
        pc: float = job[5]
        if not (end <= job[2] and rel >= job[3] and value > 0 and req > 0):
            continue
        for row in per_job[k]:
            nh: int = row[0] + hours
            gain: float = job_value(value, req, pc, nh if nh < req else req) - row[3]
            cand: float = row[4] + gain + row[5] - energy
            hidden: float = row[2] + gain - energy
            if hidden > runner:
                runner = hidden
            if cand > best:
                if best > runner:
                    runner = best
                best, first_state, first_place = cand, row[1], 1 + k
            elif cand == best:
                # an exact tie: the scan keeps the earlier (state, then "no job" before each job in order)
                if row[1] < first_state or (row[1] == first_state and 1 + k < first_place):
                    first_state, first_place = row[1], 1 + k
            elif cand > runner:
                runner = cand
    if runner >= best - clear:
        return None
    return best, first_place - 1


def state_values(codes: tuple[int, ...], jobs: tuple[JobKey, ...],
                 radix: tuple[tuple[int, int], ...]) -> list[float]:
    """Each packed state's value: the sum of its jobs' values, added job by job in job order
    from zero (as ``sum``), for at least one job."""
    n_jobs = len(jobs)
    out: list[float] = []
    for code in codes:
        total: float = 0.0
        for k in range(n_jobs):
            job = jobs[k]
            mult: int = radix[k][0]
            r: int = radix[k][1]
            total = total + job_value(job[4], job[0], job[5], code // mult % r)
        out.append(total)
    return out


def frontier_groups(jobs: tuple[JobKey, ...], columns: list[list[int]], bases: tuple[float, ...],
                    neg_es: tuple[float, ...]) -> tuple[tuple[float, int, float], tuple[tuple[GroupRow, ...], ...]]:
    """A frontier's groups for pricing extra blocks (see
    :meth:`gpu_arena.core.allocation.Frontier.groups`): the "no job" top, its first state and
    the runner-up; per job, one row per hours below the requirement, in order of first appearance."""
    n = len(bases)
    values: list[float] = []
    for i in range(n):
        values.append(bases[i] + neg_es[i])
    top: float = -INF
    first = -1
    second: float = -INF
    for i in range(n):
        v: float = values[i]
        if v > top:
            top, first, second = v, i, top
        elif v > second:
            second = v
    per_job: list[tuple[GroupRow, ...]] = []
    for k in range(len(jobs)):
        job = jobs[k]
        req: int = job[0]
        column = columns[k]
        slot: dict[int, int] = {}  # hours -> its group's place in the lists below
        hs: list[int] = []
        tops: list[float] = []
        firsts: list[int] = []
        seconds: list[float] = []
        for i in range(n):
            h: int = column[i]
            if h >= req:
                continue  # the scan never offers job k an extra block in a state that fills it
            v = values[i]
            g = slot.get(h)
            if g is None:
                slot[h] = len(hs)
                hs.append(h)
                tops.append(v)
                firsts.append(i)
                seconds.append(-INF)
            elif v > tops[g]:
                seconds[g] = tops[g]
                tops[g] = v
                firsts[g] = i
            elif v > seconds[g]:
                seconds[g] = v  # a tie with the top lands here too: it makes the pair unsure
        rows: list[GroupRow] = []
        for g in range(len(hs)):
            i = firsts[g]
            rows.append((hs[g], i, seconds[g], job_value(job[4], req, job[5], hs[g]), bases[i], neg_es[i]))
        per_job.append(tuple(rows))
    return (top, first, second), tuple(per_job)
