"""A seat's own what-if pricing of bundles of blocks, from its view alone.

The view's decision aids price one market block at a time (``marginal_value``) and each open
offer (``value_to_me``). A negotiator that buys several blocks at once (two halves of one job, or
the capacity a pooled job needs) must price *bundles*, and its offers' prices and energy change
the budget its plan can spend. :class:`OwnPlanner` does that with the grader's own exact dynamic
program (:mod:`gpu_arena.core.valuation`) over the seat's open jobs and plannable blocks, read from
the view: its own jobs' values, its own blocks and the public attributes of other labs' blocks,
never another lab's private values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..core.allocation import job_value, solve
from ..core.types import JobStatus

PLANNABLE = ("free", "reserved")


def block_key(b: Any) -> tuple[int, int, float, float]:
    """The valuation's key of a block view: (hours, end round, reliability, energy for all its hours)."""
    return (b.gpu_hours, b.end_round, b.reliability, b.energy_cost * b.gpu_hours)


def fits(b: Any, job: Any) -> bool:
    """Whether a block counts for a job: its window ends by the deadline and it is reliable enough."""
    return bool(b.end_round <= job.deadline_round and b.reliability >= job.min_reliability)


class OwnPlanner:
    """Prices hypothetical holdings for the seat whose view it is built from.

    Contract: ``net()`` equals the view's own plan (value − energy still to pay) for the jobs it
    prices; ``gain(extra, without, pay)`` is the change of the seat's potential if it received
    ``extra`` blocks, gave up ``without`` and paid ``pay`` (an offer's ``value_to_me`` for the same
    terms). ``pooled=False`` leaves pooled jobs out, which keeps the program small when many
    candidate blocks are priced (a pooled job's hours dominate the state space); pooled jobs are
    then priced with :meth:`pooled_value`.
    """

    __slots__ = ("blocks", "budget", "job_keys", "jobs", "round_index")

    def __init__(self, obs: Any, *, pooled: bool = True) -> None:
        self.round_index = obs.round_index
        self.budget = float(obs.controlled_lab_budget)
        self.jobs = [j for j in obs.private_jobs if j.status == JobStatus.OPEN and (pooled or not j.pooled)]
        self.job_keys = tuple(
            (j.gpu_hours_required, j.assigned_hours, j.deadline_round, j.min_reliability, j.value * j.share,
             j.partial_credit) for j in self.jobs)
        self.blocks = [b for b in obs.owned_blocks if b.status in PLANNABLE and b.start_round > obs.round_index]

    def plan(self, extra: Iterable[Any] = (), without: Iterable[str] = (),
             money: float = 0.0) -> tuple[float, float, dict[str, str]]:
        """(value, energy, block id -> job id) of the best plan with ``extra`` blocks added, the
        blocks named in ``without`` removed and ``money`` added to the budget."""
        if not self.jobs:
            return 0.0, 0.0, {}
        drop = set(without)
        blocks: Sequence[Any] = [b for b in self.blocks if b.block_id not in drop] + [
            b for b in extra if b.start_round > self.round_index]
        value, energy, choices = solve(tuple(block_key(b) for b in blocks), self.job_keys,
                                        max(0.0, self.budget + money))
        assignment = {b.block_id: self.jobs[k].job_id for b, k in zip(blocks, choices, strict=True) if k >= 0}
        return value, energy, assignment

    def net(self, extra: Iterable[Any] = (), without: Iterable[str] = (), money: float = 0.0) -> float:
        value, energy, _ = self.plan(extra, without, money)
        return value - energy

    def gain(self, extra: Iterable[Any] = (), without: Iterable[str] = (), pay: float = 0.0) -> float:
        """Change of the seat's potential if it got ``extra``, gave ``without`` and paid ``pay``."""
        return self.net(extra, without, -pay) - self.net() - pay

    @staticmethod
    def pooled_value(job: Any, hours: float) -> float:
        """What the seat realises from its pooled ``job`` with ``hours`` valid hours on it."""
        return job_value(job.value * job.share, job.gpu_hours_required, job.partial_credit, hours)
