"""The pooled-job planner of ``rule_expert``: proposing a coalition for a pooled job it owns.

A pooled job needs most of the world's fitting capacity, so completing it is where most of a
seat's value lies in ``coalition_market`` (decision 0015). :class:`CoalitionPooling` picks the
consent window and the member set with the best odds (members judge the payment as split equally
and must each find a free round to consent), and what it holds while a proposal gathers consents
(decision 0016). Its odds and payment are hooks — :meth:`~CoalitionPooling.used_odds`,
:meth:`~CoalitionPooling.idle_odds`, :meth:`~CoalitionPooling.consent_odds`,
:meth:`~CoalitionPooling.pool_payment` — that ``oracle`` answers from the world instead of the view.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.rules import MAX_LIST
from ..core.sums import ordered_sum
from ..core.types import PLANNABLE, Action, CoalitionStatus, JobStatus
from .negotiator import Negotiator, run_energy
from .planning import OwnPlanner, fits


class CoalitionPooling(Negotiator):
    """A negotiator that pools capacity for its own pooled job (see the module docstring); it
    remembers labs that refused its offers (``cold``) and does not ask them to pool."""

    POOL_SPARE = 1.2  # pool up to this many times the hours missing: a shock may take some

    def __init__(self, seed: int = 0, **params: Any) -> None:
        super().__init__(seed, **params)
        self.cold: dict[str, int] = {}  # lab -> round until which it is not asked again (it refused)

    def is_cold(self, obs: Any, lab: str) -> bool:
        return self.cold.get(lab, -1) >= obs.round_index or self.refuses(obs, lab)

    def pool_hold(self, obs: Any) -> tuple[set[str], float]:
        """What its own pending pool proposals hold: every block they name (trading one away, or
        buying one from a member, breaks the proposal) and the money it must still have when the
        last member consents (the payment plus the energy of its own committed blocks)."""
        me = obs.controlled_lab_id
        pending = [c for c in obs.active_coalitions if c.proposer == me and c.status == CoalitionStatus.PROPOSED]
        blocks = {b for c in pending for bs in c.commitments.values() for b in bs}
        owned = {b.block_id: b for b in obs.owned_blocks}
        money = max((c.payment + run_energy(owned[b] for b in c.commitments.get(me, []) if b in owned)
                     for c in pending), default=0.0)
        return blocks, money

    def pool_job(self, obs: Any) -> Any | None:
        """Its open pooled job that no coalition serves and that still misses hours."""
        for j in obs.private_jobs:
            if j.pooled and j.status == JobStatus.OPEN and not j.coalition_id and j.assigned_hours < j.gpu_hours_required:
                return j
        return None

    def pool_candidates(self, obs: Any, job: Any, *, settle_by: int) -> list[Any]:
        """Other labs' blocks that fit the pooled job and are still tradeable at ``settle_by``."""
        me = obs.controlled_lab_id
        finished = {lab.lab_id for lab in obs.visible_labs if lab.finished}
        busy = {b for o in obs.active_offers for b in (*o.block_ids, *o.requested_block_ids)}
        return [b for b in obs.public_market.blocks
                if b.tradeable and b.owner not in (None, me) and b.owner not in finished and fits(b, job)
                and b.start_round > settle_by and b.block_id not in busy]

    POOL_TTLS = (2, 3)  # consent windows tried (a longer one leaves fewer blocks to pool)
    POOL_SHARE = 0.55  # of what completion adds, paid to the members at formation
    USED_COST = 50.0  # what a member that runs a requested block for its own job typically asks

    def used_odds(self, block: Any, max_rounds: int) -> float:
        """Odds that another lab's plan uses one of its blocks (it then wants paying for it).

        Public facts only: jobs' deadlines spread up to a few rounds past the last round, so a
        block ending late fits fewer of its owner's jobs, and plans run cheap energy first.
        """
        late = block.end_round - max_rounds
        odds = 0.55 if late <= -2 else 0.4 if late == -1 else 0.3 if late == 0 else 0.25
        return odds * (1.15 if block.energy_cost < 0.35 else 0.75)

    def propose_pool(self, obs: Any) -> Action | None:
        """Propose one coalition that completes its pooled job (decision 0015).

        Its own fitting blocks go in first; then, over every set of other labs that can supply
        the rest, the blocks least likely to be used by their owners; value shares are all its
        own and the payment is a share of what completion adds. Members judge the payment as split
        equally among them, refuse when it does not cover what their blocks are worth to them and
        consent only in a round they have nothing to allocate, so it picks the consent window and
        member set with the best expected gain: P(every member consents) × (what completion adds −
        payment). A backup proposal with a later window may follow a round later.
        """
        job = self.pool_job(obs)
        if job is None:
            return None
        me, r = obs.controlled_lab_id, obs.round_index
        mine_open = [c for c in obs.active_coalitions if c.proposer == me and c.job_id == job.job_id]
        pending = [c for c in mine_open if c.status == CoalitionStatus.PROPOSED]
        if any(c.status == CoalitionStatus.FORMED for c in mine_open) or len(mine_open) >= 3:
            return None
        exclude = set(self.refusers)
        if pending:
            # a second proposal races the first (whichever completes first forms)
            last = pending[-1]
            waiting = set(last.members) - set(last.consented)
            if len(pending) >= 2 or not waiting:
                return None
            if r >= last.created_round + 2:
                exclude |= waiting  # a whole round passed without their consent: they probably refuse
            # otherwise a backup with a later window: a member busy allocating gets more rounds
        plans = [p for ttl in self.POOL_TTLS if (p := self.pool_plan(obs, job, ttl, exclude)) is not None]
        if not plans:
            return None
        _value, ttl, committed, chosen, payment = max(plans, key=lambda p: p[0])
        members = tuple(sorted(chosen))
        shares = dict.fromkeys(members, 0.0)
        shares[me] = 1.0
        return Action("form_coalition", job_id=job.job_id, member_lab_ids=members,
                      block_ids=tuple(b.block_id for b in committed),
                      requested_block_ids=tuple(b.block_id for bs in chosen.values() for b in bs),
                      shares=shares, payment=payment, expires_in=ttl,
                      message=f"Pool capacity for {job.gpu_hours_required} GPU-hours by round {job.deadline_round}; "
                              f"{payment:.2f} paid at formation.")

    def pool_plan(self, obs: Any, job: Any, ttl: int, exclude: set[str]
                  ) -> tuple[float, int, list[Any], dict[str, list[Any]], float] | None:
        """The best coalition for the pooled job with consents open ``ttl`` rounds: (expected
        gain, ttl, its own blocks, other members' blocks, payment), or None."""
        r = obs.round_index
        # every block must still be tradeable when the last member consents
        settle_by = r + ttl
        # its own blocks: those its other jobs do not need first, and those opening a round after
        # the consents close first (a block opening right then idles if the coalition fails)
        own = sorted((b for b in obs.owned_blocks if b.tradeable and fits(b, job) and b.start_round > settle_by),
                     key=lambda b: (b.start_round <= settle_by + 1, b.marginal_value or 0.0, -b.gpu_hours,
                                    b.block_id))
        # the pool as it stands, and the same pool without its own blocks that its other jobs use and
        # that open right after the consents close: those are held, unallocated, for the proposal
        # while a member may still consent, and idle if it fails (decision 0016, third round)
        safe = [b for b in own if not self.idles_on_failure(b, job, settle_by)]
        plans = [self.pool_plan_with(obs, job, ttl, exclude, mine) for mine in ([own, safe] if safe != own else [own])]
        found = [p for p in plans if p is not None]
        return max(found, key=lambda p: p[0]) if found else None

    @staticmethod
    def idles_on_failure(block: Any, job: Any, settle_by: int) -> bool:
        """Whether its own ``block``, committed to a proposal for ``job`` whose consents close at
        ``settle_by``, costs its other jobs if the proposal fails: it opens the round after, so it
        cannot be allocated the round before (the proposal still holds it), and its plan uses it."""
        return bool(block.start_round <= settle_by + 1 and (block.marginal_value or 0.0) > 0.5
                    and block.best_job != job.job_id)

    def pool_plan_with(self, obs: Any, job: Any, ttl: int, exclude: set[str], own: list[Any]
                       ) -> tuple[float, int, list[Any], dict[str, list[Any]], float] | None:
        """:meth:`pool_plan` with its own blocks drawn from ``own``, in that order. The expected
        gain counts what its own held blocks lose if the proposal fails (:meth:`idles_on_failure`)."""
        settle_by = obs.round_index + ttl  # as in pool_plan: when the last member may consent
        missing = job.gpu_hours_required - job.assigned_hours
        committed: list[Any] = []
        for b in own:
            if sum(x.gpu_hours for x in committed) >= missing * self.POOL_SPARE or len(committed) >= MAX_LIST:  # int sum
                break
            committed.append(b)
        need = missing - sum(b.gpu_hours for b in committed)  # int sum: GPU-hours
        if need <= 0:
            return None  # its own blocks complete the job: its plan allocates them
        budgets = {lab.lab_id: lab.budget for lab in obs.visible_labs}
        by_owner: dict[str, list[Any]] = {}
        for b in self.pool_candidates(obs, job, settle_by=settle_by):
            if b.owner not in exclude and not self.is_cold(obs, b.owner or ""):
                by_owner.setdefault(b.owner or "", []).append(b)
        own_cost = run_energy(committed)
        holdable = job.assigned_hours + sum(b.gpu_hours for b in obs.owned_blocks if b.tradeable and fits(b, job))  # int sum
        bonus = (OwnPlanner.pooled_value(job, job.gpu_hours_required)
                 - OwnPlanner.pooled_value(job, min(job.gpu_hours_required, holdable))
                 - own_cost - ordered_sum(max(0.0, b.marginal_value or 0.0) for b in committed if b.best_job != job.job_id))
        budget = obs.controlled_lab_budget - own_cost
        if bonus <= 0 or budget <= 0:
            return None
        idle_risk = ordered_sum(max(0.0, b.marginal_value or 0.0) for b in committed
                                if self.idles_on_failure(b, job, settle_by))
        best: tuple[float, int, list[Any], dict[str, list[Any]], float] | None = None
        owners = sorted(by_owner)
        for mask in range(1, 1 << len(owners)):
            subset = {o: by_owner[o] for i, o in enumerate(owners) if mask >> i & 1}
            # spare hours where they can be had: a failed or downgraded block must not leave the
            # pool short (short pools pay a fifth, and a deceptive member walks out of them)
            chosen = None
            for spare in (self.POOL_SPARE, (1.0 + self.POOL_SPARE) / 2, 1.0):
                chosen = self.pool_selection(subset, math.ceil(need * spare), budgets, obs.max_rounds)
                if chosen is not None:
                    break
            if chosen is None or set(chosen) != set(subset):
                continue  # short of hours, or a member it does not need
            payment = self.pool_payment(obs, chosen, bonus, budget)
            if payment <= 0:
                continue
            success = math.prod(self.consent_odds(obs, o, bs, payment / len(chosen), ttl) for o, bs in chosen.items())
            value = success * (bonus - payment) - (1.0 - success) * idle_risk
            if value > 0 and (best is None or value > best[0]):
                best = (value, ttl, committed, chosen, payment)
        return best

    def pool_payment(self, obs: Any, chosen: dict[str, list[Any]], bonus: float, budget: float) -> float:
        """What it pays the members of a pooled-job coalition at formation: a fixed share of what
        completion adds (it cannot see what the blocks are worth to their owners)."""
        return self.cents(min(self.POOL_SHARE * bonus, 0.9 * budget), budget)

    def consent_odds(self, obs: Any, lab: str, blocks: list[Any], each: float, ttl: int) -> float:
        """Odds that ``lab`` consents to commit ``blocks`` for a payment it reckons at ``each``
        within ``ttl`` rounds: it wants paying if its plan uses a block, and it needs a free round."""
        free = math.prod(1.0 - self.used_odds(b, obs.max_rounds) for b in blocks)
        return (free + (1.0 - free) * min(1.0, each / self.USED_COST)) * self.idle_odds(obs, lab, ttl)

    def idle_odds(self, obs: Any, lab: str, ttl: int) -> float:
        """Odds that ``lab`` has a round to consent within ``ttl`` rounds: a scripted lab first
        allocates the blocks of its plan that open next round, so it is busy in a round when one
        of its blocks opens the round after (if its plan uses it)."""
        r = obs.round_index
        busy = 1.0
        for t in range(r + 1, r + 1 + ttl):
            opening = [b for b in obs.public_market.blocks
                       if b.owner == lab and b.start_round == t + 1 and b.status in PLANNABLE]
            busy *= 1.0 - math.prod(1.0 - self.used_odds(b, obs.max_rounds) for b in opening)
        return 1.0 - busy

    def answer_odds(self, obs: Any, block: Any) -> float:
        """Odds that the owner of ``block`` answers a bid for it before it opens. It answers in a
        round it has nothing to allocate; if its plan uses the block, it allocates it the round
        before it opens (and a bid must then wait for a counter, a round earlier)."""
        window = block.start_round - 1 - obs.round_index
        owner = block.owner or ""
        used = self.used_odds(block, obs.max_rounds)
        free = self.idle_odds(obs, owner, window) if window >= 1 else 0.0
        taken = self.idle_odds(obs, owner, window - 1) if window >= 2 else 0.0
        return (1.0 - used) * free + used * taken

    def pool_selection(self, by_owner: dict[str, list[Any]], need: int, budgets: dict[str, float],
                       max_rounds: int) -> dict[str, list[Any]] | None:
        """Blocks from these owners that give ``need`` hours, the least likely used first (per
        hour), within what each owner can pay to run and the action's list limit; None if they
        cannot."""
        pool = sorted((b for bs in by_owner.values() for b in bs),
                      key=lambda b: (self.used_odds(b, max_rounds) / b.gpu_hours, -b.gpu_hours, b.block_id))
        chosen: dict[str, list[Any]] = {}
        energy: dict[str, float] = {}
        got = 0
        for b in pool:
            if got >= need or sum(len(bs) for bs in chosen.values()) >= MAX_LIST:  # int sum
                break
            owner = b.owner or ""
            cost = b.energy_cost * b.gpu_hours
            if energy.get(owner, 0.0) + cost > 0.8 * budgets.get(owner, 0.0):
                continue  # the member could not pay to run it
            chosen.setdefault(owner, []).append(b)
            energy[owner] = energy.get(owner, 0.0) + cost
            got += b.gpu_hours
        return chosen if got >= need else None
