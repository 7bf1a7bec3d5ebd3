"""A parameterised negotiator: the machinery every scripted opponent shares.

It values everything with the seat's own decision aids, which the server computes with the
grader's valuation (docs/design.md): an offer is worth its ``value_to_me`` (the change of the seat's
potential if it settled now: marginal value of the blocks plus the payment), a market block its
``marginal_value``. The parameters shape how it trades:

* ``acceptance_margin``: the share of the value at stake in a deal (its blocks, at this lab's own
  valuation) that the deal must gain it.
* ``deadline_sensitivity``: how fast that margin melts, and its bids rise, as its deadlines near.
* ``honesty``: the probability that a message it sends states its needs truthfully.
* ``coalition_trust``: how readily it commits to a coalition (and how rarely it defects).
* ``retaliation_memory``: rounds it refuses a lab that breached or sent it an exploitative offer.
* ``risk``: the share of a block's value it opens with when buying or bidding.

Each round it does the first of: allocate blocks whose windows open next round; commit to a
pending coalition that pays; answer the best incoming offer (accept, counter, or reject); pitch for an
open auction; propose a coalition for a pooled job; make a buy offer for the market block worth
most to it; otherwise wait.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from typing import Any

from ..core.policy import PolicyBase
from ..core.sums import ordered_sum
from ..core.types import PLANNABLE, Action, AuctionStatus, CoalitionStatus, JobStatus

# public design facts a bot may use to estimate what an unannounced pooled job is worth per hour
EXPECTED_VALUE_PER_HOUR = 4.2


def run_energy(blocks: Iterable[Any]) -> float:
    """The energy its owner pays to run ``blocks`` (block views): energy price × GPU-hours each."""
    return ordered_sum(b.energy_cost * b.gpu_hours for b in blocks)


def urgency_of(rounds_left: Iterable[int]) -> float:
    """0 when deadlines are far, toward 1 when the nearest is next round (``rounds_left``: rounds
    to each open job's deadline)."""
    left = list(rounds_left)
    if not left:
        return 0.0
    return 1.0 / max(1, min(left))


class Negotiator(PolicyBase):
    """Scripted seat. ``act(observation)`` reads only the seat's own view."""

    name = "negotiator"
    uses_aids = True

    def __init__(self, seed: int = 0, acceptance_margin: float = 0.08, deadline_sensitivity: float = 1.0,
                 honesty: float = 1.0, coalition_trust: float = 0.7, retaliation_memory: float = 3.0,
                 risk: float = 0.5, **_ignored: Any) -> None:
        self.rng = random.Random(seed)
        self.acceptance_margin = acceptance_margin
        self.deadline_sensitivity = deadline_sensitivity
        self.honesty = honesty
        self.coalition_trust = coalition_trust
        self.retaliation_memory = retaliation_memory
        self.risk = risk
        self.grudges: dict[str, int] = {}  # lab -> round until which it is refused
        self.asked: dict[str, int] = {}  # block -> how many times we offered for it
        self.refusers: set[str] = set()  # labs that let one of its coalition proposals expire
        self.min_pool_gain = 0.0  # share of a pooled job's value a proposal must leave the proposer

    # ------------------------------------------------------------------ valuations

    @staticmethod
    def cents(amount: float, budget: float) -> float:
        """Round a payment down to the cent, never above the budget."""
        return max(0.0, math.floor(min(amount, budget) * 100) / 100)

    def stake(self, obs: Any) -> float:
        return ordered_sum(j.value for j in obs.private_jobs) or 1.0

    def urgency(self, obs: Any) -> float:
        """0 when deadlines are far, toward 1 when an open job's deadline is next round."""
        return urgency_of(j.deadline_round - obs.round_index for j in obs.private_jobs if j.status == JobStatus.OPEN)

    def threshold(self, obs: Any, at_stake: float) -> float:
        """Money a deal must gain this lab before it says yes: its margin on the value at stake in
        the deal (the blocks it gives and gets, at its own valuation), melting as deadlines near."""
        return self.threshold_at(at_stake, self.urgency(obs))

    def threshold_at(self, at_stake: float, urgency: float) -> float:
        """:meth:`threshold` at a given urgency (the oracle predicts other labs' answers with it)."""
        melt = 1.0 / (1.0 + self.deadline_sensitivity * urgency * 3.0)
        return self.acceptance_margin * max(1.0, at_stake) * melt + 0.01

    def at_stake(self, obs: Any, offer: Any) -> float:
        """The offer's blocks valued by this lab: what it would give up plus what it would get."""
        # only the offer's blocks are read: a view prices each aid when it is first read
        mine = {b.block_id: b for b in obs.owned_blocks}
        theirs = {b.block_id: b for b in obs.public_market.blocks}
        gives = offer.requested_block_ids if offer.direction == "incoming" else offer.block_ids
        gets = offer.block_ids if offer.direction == "incoming" else offer.requested_block_ids
        return ordered_sum((mine[b].marginal_value or 0.0) if b in mine else 0.0 for b in gives) + \
            ordered_sum((theirs[b].marginal_value or 0.0) if b in theirs else 0.0 for b in gets)

    def opening_share(self, obs: Any) -> float:
        """Share of a block's value offered when buying: rises with urgency and with each retry."""
        return self.opening_share_at(self.urgency(obs))

    def opening_share_at(self, urgency: float) -> float:
        """:meth:`opening_share` at a given urgency."""
        return min(0.95, self.risk * (1.0 + self.deadline_sensitivity * urgency))

    def refuses(self, obs: Any, lab: str) -> bool:
        return self.retaliation_memory > 0 and self.grudges.get(lab, -1) >= obs.round_index

    def remember(self, obs: Any) -> None:
        """Read new public events and incoming offers for breaches and exploitation."""
        events = obs.public_market.events
        for e in events:
            if e.kind == "breach" and e.round_index >= obs.round_index - 1:
                culprit = e.text.split(" ", 1)[0]
                if culprit != obs.controlled_lab_id:
                    self.grudges[culprit] = obs.round_index + int(self.retaliation_memory)

    # ------------------------------------------------------------------ the round

    def act(self, obs: Any) -> Action:
        self.remember(obs)
        # consents before offers: a proposal needs every member within its window, an offer
        # answered a round later usually still stands
        for step in (self.allocate_due, self.answer_coalitions, self.answer_offers, self.pitch,
                     self.propose_coalition, self.buy, self.talk):
            action = step(obs)
            if action is not None:
                return action
        return Action("wait")

    def allocate_due(self, obs: Any) -> Action | None:
        """Blocks in the best plan whose window opens next round must be allocated now (where the
        plan puts them); the rest stay free to trade."""
        owned = {b.block_id: b for b in obs.owned_blocks}
        due = sorted(b for ids in obs.best_plan.values() for b in ids
                     if b in owned and owned[b].status in PLANNABLE
                     and owned[b].start_round <= obs.round_index + 1)
        if due:
            return Action("allocate_to_job", block_ids=tuple(due))
        return None

    def fitting_job(self, obs: Any, block: Any) -> str | None:
        """The job a block would serve in this seat's best plan (the view's own aid)."""
        return block.best_job

    def answer_offers(self, obs: Any) -> Action | None:
        # an offer whose sender can no longer pay it (budgets are public) cannot settle: accepting
        # it would only waste the round, every round until it expires. One whose asking price this
        # lab cannot pay cannot be accepted either, but a counter paying what it can may settle.
        budgets = {lab.lab_id: lab.budget for lab in obs.visible_labs}
        incoming = [o for o in obs.active_offers if o.direction == "incoming"
                    and o.payment <= budgets.get(o.sender, 0.0) + 1e-9]
        if not incoming:
            return None

        def affordable(o: Any) -> bool:
            return bool(o.requested_payment <= obs.controlled_lab_budget + 1e-9)

        offer = max(incoming, key=lambda o: (affordable(o), o.value_to_me, o.offer_id))
        if self.refuses(obs, offer.sender):
            return Action("reject_offer", offer_id=offer.offer_id)
        need = self.threshold(obs, self.at_stake(obs, offer))
        if offer.value_to_me >= need and affordable(offer):
            blocks = {b.block_id: b for b in obs.public_market.blocks}
            job = None
            for bid in offer.block_ids:
                if bid in blocks:
                    job = self.fitting_job(obs, blocks[bid])
                    if job:
                        break
            return Action("accept_offer", offer_id=offer.offer_id, job_id=job)
        if offer.value_to_me < -0.25 * self.stake(obs):
            # an offer that would cost it a quarter of its stake is exploitative
            self.grudges[offer.sender] = obs.round_index + int(self.retaliation_memory)
        return self.counter(obs, offer, need) or Action("reject_offer", offer_id=offer.offer_id)

    def counter(self, obs: Any, offer: Any, need: float) -> Action | None:
        """Mirror the offer's blocks and move the money by what is missing: ask the sender for more,
        or (when it was selling) offer to pay less; only if the sender could plausibly pay."""
        missing = need - offer.value_to_me
        if missing <= 0 or offer.parent_offer_id is not None:
            return None
        to_me = offer.payment - offer.requested_payment + missing  # money this lab needs to receive
        gives, gets = tuple(offer.requested_block_ids), tuple(offer.block_ids)
        if to_me > 0:
            if not gives:
                return None  # blocks it would need to be paid to take are not worth a counter
            budget = next((lab.budget for lab in obs.visible_labs if lab.lab_id == offer.sender), 0.0)
            if to_me > budget:
                return None
            return Action("counter_offer", offer_id=offer.offer_id, block_ids=gives, requested_block_ids=gets,
                          requested_payment=self.cents(to_me, budget))
        pay = self.cents(-to_me, obs.controlled_lab_budget)
        if pay <= 0:
            return None
        return Action("counter_offer", offer_id=offer.offer_id, block_ids=gives, requested_block_ids=gets, payment=pay)

    def answer_coalitions(self, obs: Any) -> Action | None:
        me = obs.controlled_lab_id
        for c in obs.active_coalitions:
            if c.status != CoalitionStatus.PROPOSED or me in c.consented or me not in c.members:
                continue
            if self.refuses(obs, c.proposer):
                continue
            mine = c.commitments.get(me, [])
            owned = {b.block_id: b for b in obs.owned_blocks}
            if any(b not in owned or not owned[b].tradeable for b in mine):
                continue
            energy = run_energy(owned[b] for b in mine)
            if energy > obs.controlled_lab_budget:
                continue  # it could not pay to run its share
            # what its blocks are worth to its own jobs, plus the energy it pays to run them in the pool
            cost = ordered_sum(owned[b].marginal_value or 0.0 for b in mine) + energy
            others = [m for m in c.members if m != c.proposer]
            paid = c.payment / max(1, len(others))
            # the pooled job's value is private: estimate it from its public hours
            expected = c.shares.get(me, 0.0) * c.gpu_hours_required * EXPECTED_VALUE_PER_HOUR
            reputation = next((lab.reputation for lab in obs.visible_labs if lab.lab_id == c.proposer), 0.5)
            trust = self.coalition_trust * (0.5 + reputation)
            if paid + trust * expected - cost >= self.threshold(obs, cost + trust * expected):
                return Action("commit_to_coalition", coalition_id=c.coalition_id)
        return None

    def pitch(self, obs: Any) -> Action | None:
        me = obs.controlled_lab_id
        for a in obs.public_market.auctions:
            if a.status != AuctionStatus.OPEN or a.close_round <= obs.round_index:
                continue
            block = next((b for b in obs.public_market.blocks if b.block_id == a.block_id), None)
            value = block.marginal_value if block is not None and block.marginal_value else 0.0
            if value <= 0:
                continue
            mine = next((p for p in a.pitches if p.lab_id == me), None)
            top = max(a.pitches, key=lambda p: p.bid, default=None)
            bid = self.cents(value * self.opening_share(obs), obs.controlled_lab_budget)
            if mine is None and (top is None or bid > top.bid):
                job = self.fitting_job(obs, block)
                return Action("make_pitch", payment=bid, job_id=job, message=self.pitch_text(obs, job))
            if top is not None and top.lab_id != me and top.bid < value * 0.9 and top.bid + 1 <= obs.controlled_lab_budget:
                raise_to = self.cents(min(value * 0.9, top.bid + max(1.0, 0.1 * value)), obs.controlled_lab_budget)
                if raise_to > top.bid:
                    return Action("counter_pitch", target_lab_id=top.lab_id, payment=raise_to,
                                  message=self.pitch_text(obs, self.fitting_job(obs, block)))
        return None

    def pitch_text(self, obs: Any, job_id: str | None) -> str:
        job = next((j for j in obs.private_jobs if j.job_id == job_id), None)
        if job is None:
            return "We can put this block to use."
        hours, deadline = job.gpu_hours_required, job.deadline_round
        if self.rng.random() >= self.honesty:
            hours, deadline = hours * 2, max(obs.round_index + 1, deadline - 2)  # a deceptive claim
        return f"Our job needs {hours} GPU-hours by round {deadline}."

    def propose_coalition(self, obs: Any) -> Action | None:
        """Pool capacity for an open pooled job: ask other labs for fitting blocks whose windows open
        after the consent window, offering value shares by hours and a payment. Its own blocks reach
        the pooled job through its own plan, so it commits none (nothing of its own can break it)."""
        me = obs.controlled_lab_id
        if any(c.proposer == me and c.status in (CoalitionStatus.PROPOSED, CoalitionStatus.FORMED, CoalitionStatus.SETTLED) for c in obs.active_coalitions):
            return None
        for c in obs.active_coalitions:
            if c.proposer == me and c.status == CoalitionStatus.EXPIRED:
                # members who let an earlier proposal expire are not asked again
                self.refusers.update(m for m in c.members if m not in c.consented)
        ttl = 3
        for job in obs.private_jobs:
            if not job.pooled or job.status != JobStatus.OPEN or job.coalition_id:
                continue
            # only its own blocks that its plan already gives this job count: a block the plan
            # keeps for another job would leave the pool short, for partial credit at best
            planned = set(obs.best_plan.get(job.job_id, ()))
            mine = [b for b in obs.owned_blocks if b.block_id in planned and b.status in PLANNABLE]
            need = job.gpu_hours_required - job.assigned_hours - sum(b.gpu_hours for b in mine)  # int sum
            if need <= 0:
                continue
            pool = sorted((b for b in obs.public_market.blocks if b.tradeable and b.owner != me
                           and b.start_round > obs.round_index + ttl + 1
                           and b.end_round <= job.deadline_round and b.reliability >= job.min_reliability
                           and not self.refuses(obs, b.owner or "") and b.owner not in self.refusers),
                          key=lambda b: (-b.gpu_hours, b.block_id))
            chosen: list[Any] = []
            got = 0
            for b in pool:
                if got >= need:
                    break
                chosen.append(b)
                got += b.gpu_hours
            if not chosen or got < need:
                continue  # a pool that cannot complete the job earns only partial credit
            members = tuple(sorted({b.owner for b in chosen}))
            total = job.gpu_hours_required
            shares = {m: round(0.9 * sum(b.gpu_hours for b in chosen if b.owner == m) / total, 6)  # int sum: GPU-hours
                      for m in members}
            shares[me] = round(1.0 - ordered_sum(shares.values()), 6)
            # it knows what its pooled job is worth: pay a tenth of it to win the members' consent
            payment = self.cents(0.1 * job.value, obs.controlled_lab_budget * 0.5)
            if shares[me] * job.value - payment < self.min_pool_gain * job.value:
                continue  # what is left to it after shares and payment is not worth the risk
            return Action("form_coalition", job_id=job.job_id, member_lab_ids=members,
                          requested_block_ids=tuple(b.block_id for b in chosen), shares=shares, payment=payment,
                          expires_in=ttl,
                          message=f"Pool capacity for {job.gpu_hours_required} GPU-hours by round {job.deadline_round}.")
        return None

    def buy(self, obs: Any) -> Action | None:
        me = obs.controlled_lab_id
        if any(o.direction == "outgoing" for o in obs.active_offers):
            return None  # one open bid at a time: wait for the answer
        wanted = [b for b in obs.public_market.blocks
                  if b.tradeable and b.owner not in (None, me) and (b.marginal_value or 0) > 1.0
                  and not self.refuses(obs, b.owner or "")]
        if not wanted:
            return None
        block = max(wanted, key=lambda b: (b.marginal_value, b.block_id))
        tries = self.asked.get(block.block_id, 0)
        if tries >= 3:
            return None
        self.asked[block.block_id] = tries + 1
        share = min(0.95, self.opening_share(obs) + 0.15 * tries)
        price = self.cents((block.marginal_value or 0) * share, obs.controlled_lab_budget)
        if price <= 0:
            return None
        return Action("send_offer", target_lab_id=block.owner, requested_block_ids=(block.block_id,),
                      payment=price, job_id=self.fitting_job(obs, block), expires_in=2)

    def talk(self, obs: Any) -> Action | None:
        return None
