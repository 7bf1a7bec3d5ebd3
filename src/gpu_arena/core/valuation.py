"""Valuation: a lab's best allocation of its blocks to its jobs, and its potential.

The same functions price everything: the reward's potential, the seat's decision aids, the
opponents' offer valuations and the final settlement. The allocation itself is the exact dynamic
program of :mod:`gpu_arena.core.allocation`; the welfare optimum over a whole world is
:mod:`gpu_arena.core.welfare`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .allocation import BlockKey, Frontier, FrontierCache, extra_price, extra_prices, frontier, job_value
from .types import ASSIGNED, PLANNABLE, Block, CoalitionStatus, Job, JobStatus, World


def block_fits(block: Block, job: Job) -> bool:
    return block.end_round <= job.deadline_round and block.reliability >= job.min_reliability


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


def block_key(b: Block) -> BlockKey:
    return (b.hours, b.end_round, b.reliability, b.energy_cost * b.hours)


class LabValuer:
    """Prices hypothetical holdings for one lab: the jobs side is computed once, blocks vary.

    Used for decision aids (marginal value of a block, value of an offer) where many
    what-if plans share the same jobs. A valuer describes one world state: build a new one after
    the world changes. ``plan()`` (no what-if) is computed once per valuer. ``frontiers`` is
    where its solved allocation problems are kept (an episode's :class:`FrontierCache`; None: the
    shared cache); the prices are the same either way.
    """

    __slots__ = ("_base", "_frontier", "_frontiers", "block_keys", "blocks", "budget", "job_keys", "jobs",
                 "round_index")

    def __init__(self, world: World, lab_id: str, budget: float | None = None,
                 frontiers: FrontierCache | None = None) -> None:
        r = world.round_index
        open_ = JobStatus.OPEN
        jobs = [j for j in world.jobs.values() if j.owner == lab_id and j.status == open_]
        mine = {j.job_id: j for j in jobs}
        hours = dict.fromkeys(mine, 0)
        blocks: list[Block] = []
        assigned, plannable = ASSIGNED, PLANNABLE
        # one pass over the blocks: the lab's plannable ones, and valid hours already on its jobs
        for b in world.blocks.values():
            jid = b.job_id
            if jid is not None and jid in mine and b.status in assigned:
                if block_fits(b, mine[jid]):
                    hours[jid] += b.hours
            elif b.owner == lab_id and b.status in plannable and b.start_round > r:
                blocks.append(b)
        self._setup(world, lab_id, budget, jobs, blocks, hours, frontiers)

    @classmethod
    def from_parts(cls, world: World, lab_id: str, jobs: list[Job], blocks: list[Block],
                   hours: Mapping[str, int], frontiers: FrontierCache | None = None) -> LabValuer:
        """A valuer from inputs already gathered for this world state: the lab's open ``jobs`` and
        plannable ``blocks`` (both in world order) and the valid ``hours`` on each job (a view
        index gathers them for every lab in one pass). Equal to ``LabValuer(world, lab_id)``."""
        valuer = cls.__new__(cls)
        valuer._setup(world, lab_id, None, jobs, blocks, hours, frontiers)
        return valuer

    def _setup(self, world: World, lab_id: str, budget: float | None, jobs: list[Job], blocks: list[Block],
               hours: Mapping[str, int], frontiers: FrontierCache | None) -> None:
        self.round_index = world.round_index
        self.budget = world.labs[lab_id].budget if budget is None else budget
        self.jobs = jobs
        self.blocks = blocks
        # block_key inlined: a valuer is built for every lab the ledger re-prices
        self.block_keys = tuple([(h := b.gpu_count * b.duration, b.start_round + b.duration, b.reliability,
                                  b.energy_cost * h) for b in blocks])
        self.job_keys = tuple([
            (j.gpu_hours_required, hours[j.job_id], j.deadline_round, j.min_reliability,
             j.value * owner_share(world, j), j.partial_credit)
            for j in jobs])
        self._base: tuple[float, float, dict[str, str]] | None = None
        self._frontier: Frontier | None = None  # the DP of its own blocks, fetched on first use
        self._frontiers = frontiers  # where its frontiers are kept (an episode's; None: the shared cache)

    def plan(self, extra: Iterable[Block] = (), without: Iterable[str] = (), money: float = 0.0) -> Plan:
        """Best plan with ``extra`` blocks, without ``without``, and ``money`` added to the budget."""
        if not self.jobs:
            return Plan(0.0, 0.0, {})
        drop = set(without)
        extra = [b for b in extra if b.start_round > self.round_index]
        if not drop and not extra and not money:
            value, energy, assignment = self.best()
            return Plan(value, energy, dict(assignment))  # a fresh dict: callers may keep or change it
        blocks = [b for b in self.blocks if b.block_id not in drop] + extra
        keys = self._keys(drop, [block_key(b) for b in extra])
        value, energy, choices = self._solve(keys, money)
        assignment = {b.block_id: self.jobs[k].job_id for b, k in zip(blocks, choices, strict=True) if k >= 0}
        return Plan(value, energy, assignment)

    def best(self) -> tuple[float, float, Mapping[str, str]]:
        """:meth:`plan` as (value, energy, assignment), solved once per valuer; the assignment is
        the valuer's own (read it, never change it: :meth:`plan` hands out copies)."""
        if self._base is None:
            if not self.jobs:
                self._base = (0.0, 0.0, {})
            else:
                value, energy, choices = self._solve_own()
                self._base = (value, energy, {b.block_id: self.jobs[k].job_id
                                              for b, k in zip(self.blocks, choices, strict=True) if k >= 0})
        return self._base

    def totals(self) -> tuple[float, float]:
        """(value, energy) of :meth:`plan`, without building its assignment (the ledger's re-pricing
        after every event needs no more)."""
        if not self.jobs:
            return 0.0, 0.0
        if self._base is not None:
            return self._base[0], self._base[1]
        value, energy, _choices = self._solve_own()
        return value, energy

    def _solve(self, keys: tuple[BlockKey, ...], money: float = 0.0) -> tuple[float, float, tuple[int, ...]]:
        """The best plan of the blocks ``keys`` for its jobs, with ``money`` added to the budget."""
        return frontier(keys, self.job_keys, self._frontiers).solve(max(0.0, self.budget + money))

    def _own(self) -> Frontier:
        """The frontier of its own blocks and jobs, kept: one cache lookup per valuer."""
        if self._frontier is None:
            self._frontier = frontier(self.block_keys, self.job_keys, self._frontiers)
        return self._frontier

    def _solve_own(self) -> tuple[float, float, tuple[int, ...]]:
        """The best assignment of the valuer's own blocks at its own budget (memoised per frontier)."""
        return self._own().solve(max(0.0, self.budget + 0.0))

    def _keys(self, drop: set[str], extra: list[BlockKey]) -> tuple[BlockKey, ...]:
        """The keys of its blocks but ``drop``, then ``extra``'s (read from the keys taken when the
        valuer was built, never from the blocks again: a valuer prices the state it was built on)."""
        if not drop and not extra:
            return self.block_keys
        return tuple(k for b, k in zip(self.blocks, self.block_keys, strict=True) if b.block_id not in drop) + \
            tuple(extra)

    def net(self, extra: Iterable[Block] = (), without: Iterable[str] = (), money: float = 0.0) -> float:
        return self.net_of([(b.start_round, block_key(b)) for b in extra], without, money)

    def net_of(self, extra: Sequence[tuple[int, BlockKey]], without: Iterable[str] = (), money: float = 0.0) -> float:
        """:meth:`net` with the extra blocks given as (start round, :func:`block_key`) pairs, so a
        price can be asked for after the world moved on (a view's lazy aids keep these)."""
        drop = set(without)
        if len(extra) == 1 and not drop and not money and self.jobs:
            start, key = extra[0]
            if start <= self.round_index:
                return self.plan().net
            return extra_price(self._own(), key, self.budget)[0]
        if not self.jobs:
            return 0.0
        keys = [key for start, key in extra if start > self.round_index]
        if not drop and not keys and not money:
            return self.plan().net
        value, energy, _choices = self._solve(self._keys(drop, keys), money)
        return value - energy

    def job_for(self, block: Block) -> str | None:
        """The job ``block`` would serve in this lab's best plan if it held it (None: no job)."""
        if not self.jobs or block.start_round <= self.round_index:
            return None
        _best, k = extra_price(self._own(), block_key(block), self.budget)
        return self.jobs[k].job_id if k >= 0 else None

    def extra_prices(self, blocks: Sequence[Block], keys: Sequence[BlockKey] | None = None
                     ) -> list[tuple[float, str | None]]:
        """For each of ``blocks`` (all starting after this round): ``net(extra=[b])`` and
        ``job_for(b)``, priced together (see :func:`with_extras`). ``keys`` may pass
        ``block_key`` of each block (a view index has them for every seat)."""
        return self.prices_of([block_key(b) for b in blocks] if keys is None else keys)

    def prices_of(self, keys: Sequence[BlockKey]) -> list[tuple[float, str | None]]:
        """:meth:`extra_prices` of blocks given by their :func:`block_key` alone."""
        if not self.jobs:
            return [(0.0, None)] * len(keys)
        prices = extra_prices(self._own(), keys, self.budget)
        return [(best, self.jobs[k].job_id if k >= 0 else None) for best, k in prices]

    def net_without(self, i: int) -> float:
        """``net(without=(self.blocks[i].block_id,))``, by position."""
        if not self.jobs:
            return 0.0
        base_value, base_energy, choices = self._solve_own()
        if choices[i] < 0:
            # the best plan does not use block i, so it stays feasible and optimal without it:
            # no second DP (about half of a lab's blocks, and the priciest part of the aids)
            return base_value - base_energy
        keys = self.block_keys
        value, energy, _choices = self._solve(keys[:i] + keys[i + 1:])
        return value - energy


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
        if c.status != CoalitionStatus.FORMED or lab_id not in c.shares:
            continue
        job = world.jobs[c.job_id]
        if job.owner == lab_id or job.status != JobStatus.OPEN:
            continue
        pooled = valid_hours(world, job) if hours is None else hours[job.job_id]
        total += c.shares[lab_id] * job_value(job.value, job.gpu_hours_required, job.partial_credit, pooled)
    return total


def potential_parts(world: World, lab_id: str, plan: Plan | None = None) -> tuple[float, float]:
    """Φ split into (value part, money part); Φ = value + money.

    value: realised job value + value reachable by the best plan + coalition shares.
    money: budget − energy the best plan would still pay.
    """
    if plan is None:
        plan = best_allocation(world, lab_id)
    return parts_of(world, lab_id, plan.value, plan.energy)


def parts_of(world: World, lab_id: str, plan_value: float, plan_energy: float) -> tuple[float, float]:
    """:func:`potential_parts` given the best plan's value and energy (:meth:`LabValuer.totals`)."""
    lab = world.labs[lab_id]
    return lab.realized_value + plan_value + member_share_value(world, lab_id), lab.budget - plan_energy


def potential(world: World, lab_id: str, valuer: LabValuer | None = None) -> float:
    """Φ of the lab; ``valuer`` may pass its :class:`LabValuer` already built on this world state."""
    v, m = potential_parts(world, lab_id, valuer.plan() if valuer is not None else None)
    return v + m
