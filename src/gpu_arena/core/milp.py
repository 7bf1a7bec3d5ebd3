"""The welfare optimum as a mixed-integer program, solved by HiGHS (through SciPy): the fallback of
:func:`gpu_arena.core.welfare.social_optimum` for a component whose exact search outgrows its
memory budget, and the tests' independent check of that search.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from .types import Block, BlockStatus, Job
from .valuation import block_fits


@contextmanager
def quiet_native_output() -> Iterator[None]:
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


def welfare_milp(blocks: Sequence[Block], jobs: Sequence[Job]) -> float:
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
    with quiet_native_output():
        # a zero gap: HiGHS's default (1e-4 relative) stops short of the optimum on some worlds
        # (coalition_market train seed 49: 686.004 against 686.064)
        res = milp(c, constraints=LinearConstraint(np.array(rows), lo, hi), integrality=integrality,
                   bounds=Bounds(np.zeros(n), upper), options={"mip_rel_gap": 0.0})
    if res.status != 0 or res.x is None:  # pragma: no cover - HiGHS solves these small bounded MILPs
        raise RuntimeError(f"welfare MILP failed: {res.message}")
    return max(0.0, float(-res.fun))
