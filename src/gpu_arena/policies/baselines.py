"""Baselines for result tables (DESIGN §4): greedy_hoarder, always_accept, rule_expert, oracle.

(``random_valid``, ``no_negotiation`` and ``wait`` live in :mod:`gpu_arena.core.policy`.)
"""

from __future__ import annotations

import math
from typing import Any

from ..core.types import Action, World
from ..core.valuation import LabValuer
from .negotiator import Negotiator


class GreedyHoarderPolicy(Negotiator):
    """Asks for every block worth anything to it at a tenth of its value and never sells."""

    name = "greedy_hoarder"

    def __init__(self, seed: int = 0, **_ignored: Any) -> None:
        super().__init__(seed, acceptance_margin=10.0, risk=0.1, retaliation_memory=0)

    def answer_offers(self, obs: Any) -> Action | None:
        for o in obs.active_offers:
            if o.direction == "incoming" and not o.requested_block_ids and o.value_to_me > 0:
                return Action("accept_offer", offer_id=o.offer_id)  # free blocks or money: take them
        return None

    def buy(self, obs: Any) -> Action | None:
        me = obs.controlled_lab_id
        if sum(1 for o in obs.active_offers if o.direction == "outgoing") >= 3:
            return None
        asked = {b for o in obs.active_offers if o.direction == "outgoing" for b in o.requested_block_ids}
        for b in sorted(obs.public_market.blocks, key=lambda x: -(x.marginal_value or 0)):
            if b.tradeable and b.owner not in (None, me) and (b.marginal_value or 0) > 0 and b.block_id not in asked:
                price = self.cents(0.1 * (b.marginal_value or 0), obs.controlled_lab_budget)
                return Action("send_offer", target_lab_id=b.owner, requested_block_ids=(b.block_id,),
                              payment=price, job_id=self.fitting_job(obs, b))
        return None

    def propose_coalition(self, obs: Any) -> Action | None:
        return None


class AlwaysAcceptPolicy(Negotiator):
    """Says yes to every offer and coalition; otherwise allocates its blocks and waits."""

    name = "always_accept"

    def __init__(self, seed: int = 0, **_ignored: Any) -> None:
        super().__init__(seed, acceptance_margin=0.0, retaliation_memory=0)

    def answer_offers(self, obs: Any) -> Action | None:
        for o in obs.active_offers:
            if o.direction == "incoming":
                return Action("accept_offer", offer_id=o.offer_id)
        return None

    def answer_coalitions(self, obs: Any) -> Action | None:
        me = obs.controlled_lab_id
        for c in obs.active_coalitions:
            if c.status == "proposed" and me in c.members and me not in c.consented:
                return Action("commit_to_coalition", coalition_id=c.coalition_id)
        return None

    def pitch(self, obs: Any) -> Action | None:
        return None

    def propose_coalition(self, obs: Any) -> Action | None:
        return None

    def buy(self, obs: Any) -> Action | None:
        return None


class RuleExpertPolicy(Negotiator):
    """A strong hand-written negotiator: accepts anything that gains it money, buys what it values
    at rising prices, sells what it cannot use, pools for its pooled jobs, allocates on time."""

    name = "rule_expert"

    def __init__(self, seed: int = 0, **_ignored: Any) -> None:
        super().__init__(seed, acceptance_margin=0.005, deadline_sensitivity=1.5, honesty=1.0,
                         coalition_trust=0.8, retaliation_memory=2, risk=0.45)
        self.last_price: dict[str, float] = {}
        # a pool it mostly buys into pays members nearly all of the job: propose only when at
        # least a quarter of the value is left to it (its own hours carry much of the job)
        self.min_pool_gain = 0.25

    def act(self, obs: Any) -> Action:
        self.remember(obs)
        for step in (self.allocate_due, self.answer_coalitions, self.answer_offers, self.pitch,
                     self.propose_coalition, self.buy, self.sell, self.finish_when_done):
            action = step(obs)
            if action is not None:
                return action
        return Action("wait")

    # share of a block's value offered on each try: cheap first (many sellers cannot use what they
    # sell), up to nearly all of it
    SCHEDULE = (0.15, 0.4, 0.7, 0.9)
    MAX_OPEN = 3

    def allocate_due(self, obs: Any) -> Action | None:
        """Allocate the plan's blocks whose windows open next round, and with them those opening
        the round after: one action instead of two leaves a round free for trading."""
        owned = {b.block_id: b for b in obs.owned_blocks}
        planned = [owned[b] for ids in obs.best_plan.values() for b in ids
                   if b in owned and owned[b].status in ("free", "reserved")]
        if not any(b.start_round <= obs.round_index + 1 for b in planned):
            return None
        due = sorted(b.block_id for b in planned if b.start_round <= obs.round_index + 2)
        return Action("allocate_to_job", block_ids=tuple(due))

    def buy(self, obs: Any) -> Action | None:
        """Bid for one block worth something to it, climbing a price ladder on each try, with up to
        three bids open at once (one per owner) and blocks it cannot use as sweeteners. Blocks that
        must be bought now come first: a block opening in two rounds can only be bought by an offer
        made now; then the most valuable."""
        me, r = obs.controlled_lab_id, obs.round_index
        outgoing = [o for o in obs.active_offers if o.direction == "outgoing"]
        if len(outgoing) >= self.MAX_OPEN:
            return None
        pending = {b for o in outgoing for b in o.requested_block_ids}
        busy = {o.target for o in outgoing}
        wanted = [b for b in obs.public_market.blocks
                  if b.tradeable and b.owner not in (None, me) and b.owner not in busy
                  and (b.marginal_value or 0) > 0.5 and b.start_round >= r + 2
                  and b.block_id not in pending and self.asked.get(b.block_id, 0) < len(self.SCHEDULE)
                  and not self.refuses(obs, b.owner or "")]
        if not wanted:
            return None
        block = min(wanted, key=lambda b: (b.start_round > r + 2, -(b.marginal_value or 0), b.block_id))
        tries = self.asked.get(block.block_id, 0)
        self.asked[block.block_id] = tries + 1
        price = self.cents((block.marginal_value or 0) * self.SCHEDULE[tries], obs.controlled_lab_budget)
        if tries and price <= self.last_price.get(block.block_id, -1.0):
            return None  # cannot raise the bid (budget): asking again would only be spam
        self.last_price[block.block_id] = price
        used = {b for o in outgoing for b in o.block_ids}
        spare = tuple(b.block_id for b in obs.owned_blocks if b.tradeable and (b.marginal_value or 0) <= 0
                      and not b.no_resale and b.block_id not in used)[:2]
        if price <= 0 and not spare:
            return None
        return Action("send_offer", target_lab_id=block.owner, requested_block_ids=(block.block_id,),
                      block_ids=spare, payment=price, job_id=self.fitting_job(obs, block), expires_in=2)

    def sell(self, obs: Any) -> Action | None:
        """Offer a block it cannot use (worth 0 to it) to a lab that might, for a modest price."""
        if any(o.direction == "outgoing" for o in obs.active_offers):
            return None
        spare = [b for b in obs.owned_blocks if b.tradeable and (b.marginal_value or 0) <= 0 and not b.no_resale]
        others = sorted((lab for lab in obs.visible_labs if lab.lab_id != obs.controlled_lab_id and not lab.finished),
                        key=lambda lab: (-lab.budget, lab.lab_id))
        if not spare or not others:
            return None
        block = spare[obs.round_index % len(spare)]
        buyer = others[obs.round_index % len(others)]
        price = self.cents(0.5 * block.gpu_hours, buyer.budget * 0.2)
        if price <= 0:
            return None
        return Action("send_offer", target_lab_id=buyer.lab_id, block_ids=(block.block_id,),
                      requested_payment=price, expires_in=1)

    def finish_when_done(self, obs: Any) -> Action | None:
        return None


class OraclePolicy(RuleExpertPolicy):
    """Sees every lab's private values (the god view) and prices every purchase at exactly what the
    seller needs to say yes. A reference for result tables, not a fair player.

    The environment (or harness) hands it the world through :meth:`bind` before each action.
    """

    name = "oracle"
    needs_world = True

    def __init__(self, seed: int = 0, **_ignored: Any) -> None:
        super().__init__(seed)
        self.world: World | None = None

    def bind(self, world: World) -> None:
        self.world = world

    def buy(self, obs: Any) -> Action | None:
        w = self.world
        if w is None:
            return super().buy(obs)
        me = obs.controlled_lab_id
        if any(o.direction == "outgoing" for o in obs.active_offers):
            return None
        best: tuple[float, Any, float] | None = None
        for b in obs.public_market.blocks:
            gain = b.marginal_value or 0.0
            if not b.tradeable or b.owner in (None, me) or gain <= 0:
                continue
            owner = w.labs[b.owner]
            valuer = LabValuer(w, b.owner)
            loss = valuer.net() - valuer.net(without=(b.block_id,))
            # what the seller's policy will demand, read from its true parameters (a margin on the
            # value at stake, at most three times the drawn margin for the most demanding archetype)
            demand = owner.params.get("acceptance_margin", 0.1) * 3.0 * max(1.0, loss) + 0.01
            price = math.ceil((loss + demand + 0.5) * 100) / 100
            surplus = gain - price
            if surplus > 0 and price <= obs.controlled_lab_budget and (best is None or surplus > best[0]):
                best = (surplus, b, price)
        if best is None:
            return None
        _surplus, block, price = best
        return Action("send_offer", target_lab_id=block.owner, requested_block_ids=(block.block_id,),
                      payment=price, job_id=self.fitting_job(obs, block), expires_in=2)
