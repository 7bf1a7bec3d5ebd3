"""``oracle``: ``rule_expert`` with the god view, a reference for result tables.

It prices every bid and coalition at exactly what the other side accepts (and bids above what
rival labs will), knows which blocks other labs use and when they are too busy to answer or
consent, and sells to the lab that values a block most. Other labs' answers are predicted with
their own policies' formulas (:meth:`~gpu_arena.policies.negotiator.Negotiator.threshold_at`,
:meth:`~gpu_arena.policies.negotiator.Negotiator.opening_share_at`), on the world's valuations.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.sums import ordered_sum
from ..core.types import Action, JobStatus, World
from ..core.valuation import LabValuer
from .archetypes import ARCHETYPES
from .expert import RuleExpertPolicy
from .negotiator import Negotiator, run_energy, urgency_of


class OraclePolicy(RuleExpertPolicy):
    """``rule_expert`` with the god view: it knows every lab's private values, plans and policy
    parameters. It bids exactly what the seller will accept, but above what the other labs'
    policies will bid (a lab answers its best offer first); it knows which blocks other labs'
    plans use and when a lab is too busy to answer or consent; it pays a pooled-job coalition
    exactly what its dearest member needs; it sells a block it does not use to the lab that values
    it most, at that lab's price. A reference for result tables, not a fair player.

    The environment (or harness) hands it the world through :meth:`bind` before each action.
    """

    name = "oracle"
    needs_world = True

    def __init__(self, seed: int = 0, **_ignored: Any) -> None:
        super().__init__(seed)
        self.world: World | None = None
        self._policies: dict[str, Negotiator] = {}
        self._valuers: dict[str, tuple[int, int, LabValuer]] = {}

    def bind(self, world: World) -> None:
        self.world = world

    # ------------------------------------------------------------------ the god view

    def policy_of(self, lab: str) -> Negotiator | None:
        """The scripted policy (with its parameters) that plays ``lab``, rebuilt from the world."""
        w = self.world
        if w is None or lab not in w.labs:
            return None
        if lab not in self._policies:
            factory = ARCHETYPES.get(w.labs[lab].archetype)
            if factory is None:
                return None
            self._policies[lab] = factory(seed=0, **w.labs[lab].params)
        return self._policies[lab]

    def valuer(self, lab: str) -> LabValuer:
        w = self.world
        assert w is not None
        hit = self._valuers.get(lab)
        if hit is not None and hit[:2] == (w.version, w.round_index):
            return hit[2]
        valuer = LabValuer(w, lab)
        self._valuers[lab] = (w.version, w.round_index, valuer)
        return valuer

    def rounds_left(self, lab: str, ahead: int = 0) -> list[int]:
        """Rounds to each open job's deadline of ``lab``, counted from ``ahead`` rounds from now."""
        w = self.world
        assert w is not None
        return [j.deadline_round - w.round_index - ahead for j in w.jobs.values() if j.owner == lab and j.status == JobStatus.OPEN]

    def demand(self, lab: str, at_stake: float) -> float | None:
        """The gain ``lab``'s policy wants from a deal with ``at_stake`` value in it when it answers
        next round (its margin melts a little as its deadlines near)."""
        w = self.world
        pol = self.policy_of(lab)
        if w is None or pol is None:
            return None
        # it answers next round: one round less to each deadline
        return pol.threshold_at(at_stake, urgency_of(self.rounds_left(lab, ahead=1)))

    def losses(self, lab: str, block_ids: list[str]) -> tuple[float, float]:
        """(what losing ``block_ids`` together costs ``lab``, the sum of their single losses)."""
        valuer = self.valuer(lab)
        base = valuer.net()
        joint = base - valuer.net(without=block_ids)
        single = ordered_sum(base - valuer.net(without=(b,)) for b in block_ids)
        return joint, single

    def reservation(self, owner: str, block_ids: list[str]) -> float | None:
        """The least payment ``owner``'s policy accepts for ``block_ids`` (None: unknown seller)."""
        joint, single = self.losses(owner, block_ids) if self.world is not None else (0.0, 0.0)
        need = self.demand(owner, single)
        return None if need is None else joint + need

    # ------------------------------------------------------------------ pricing with it

    def bid_price(self, obs: Any, block: Any, value: float, tries: int) -> float | None:
        exact = self.reservation(block.owner or "", [block.block_id])
        if exact is None or self.world is None:
            return super().bid_price(obs, block, value, tries)
        # the owner answers its best offer first: outbid what the other labs' policies will bid
        rival = max((self.rival_bid(lab, block.block_id) for lab in self.world.labs
                     if lab not in (obs.controlled_lab_id, block.owner)), default=0.0)
        for floor in (max(exact, rival), exact):
            price = math.ceil((floor + 0.05 + 0.5 * tries) * 100) / 100
            if price < value:
                return price
        return None

    def rival_bid(self, lab: str, block_id: str) -> float:
        """What ``lab``'s policy bids for a block (its opening share of the block's value to it)."""
        w, pol = self.world, self.policy_of(lab)
        if w is None or pol is None:
            return 0.0
        valuer = self.valuer(lab)
        gain = valuer.net(extra=(w.blocks[block_id],)) - valuer.net()
        if gain <= 1.0:
            return 0.0  # a scripted lab bids only for blocks worth more than 1 to it
        return pol.opening_share_at(urgency_of(self.rounds_left(lab))) * gain

    def used_odds(self, block: Any, max_rounds: int) -> float:
        if self.world is None or block.owner not in self.world.labs:
            return super().used_odds(block, max_rounds)
        return 1.0 if self.losses(block.owner, [block.block_id])[0] > 0.5 else 0.0

    def member_need(self, lab: str, blocks: list[Any]) -> float | None:
        """The payment (as split equally, the way a member reckons it) ``lab`` needs to commit: what
        the blocks are worth to its own jobs plus the energy it pays to run them in the pool."""
        _joint, single = self.losses(lab, [b.block_id for b in blocks])
        cost = single + run_energy(blocks)
        need = self.demand(lab, cost)
        return None if need is None else cost + need

    def pool_payment(self, obs: Any, chosen: dict[str, list[Any]], bonus: float, budget: float) -> float:
        if self.world is None:
            return super().pool_payment(obs, chosen, bonus, budget)
        needs = [self.member_need(lab, bs) for lab, bs in chosen.items()]
        if any(n is None for n in needs):
            return super().pool_payment(obs, chosen, bonus, budget)
        # every member reckons the payment split equally: the dearest one sets it (plans move a
        # little before it answers, hence the margin)
        exact = len(chosen) * max(n or 0.0 for n in needs) * 1.1 + 1.0
        return self.cents(min(exact, 0.9 * budget), budget)

    def consent_odds(self, obs: Any, lab: str, blocks: list[Any], each: float, ttl: int) -> float:
        w = self.world
        need = self.member_need(lab, blocks) if w is not None else None
        if w is None or need is None:
            return super().consent_odds(obs, lab, blocks, each, ttl)
        willing = each >= need and run_energy(blocks) <= w.labs[lab].budget
        return (0.95 if willing else 0.05) * self.idle_odds(obs, lab, ttl)

    def idle_odds(self, obs: Any, lab: str, ttl: int) -> float:
        w = self.world
        if w is None or lab not in w.labs:
            return super().idle_odds(obs, lab, ttl)
        plan = self.valuer(lab).plan().assignment
        r = obs.round_index
        # it allocates its plan's blocks the round before they open: busy in every such round
        starts = {w.blocks[b].start_round for b in plan if b in w.blocks}
        free_rounds = [t for t in range(r + 1, r + 1 + ttl) if t + 1 not in starts]
        return 0.9 if free_rounds else 0.1

    def sell(self, obs: Any) -> Action | None:
        """Offer a block its plan does not use to the lab that values it most, at that lab's price."""
        w = self.world
        if w is None:
            return super().sell(obs)
        me, r = obs.controlled_lab_id, obs.round_index
        if r == 0 or sum(1 for o in obs.active_offers if o.direction == "outgoing") >= self.MAX_OPEN:
            return None
        best: tuple[float, str, str] | None = None
        for b in self.spare_blocks(obs):
            for lab in w.labs.values():
                if lab.lab_id == me or lab.finished:
                    continue
                valuer = self.valuer(lab.lab_id)
                gain = valuer.net(extra=(w.blocks[b.block_id],)) - valuer.net()
                need = self.demand(lab.lab_id, gain)
                if need is None:
                    continue
                price = math.floor(min(gain - need - 0.05, lab.budget) * 100) / 100
                if price > 0.5 and (best is None or price > best[0]):
                    best = (price, lab.lab_id, b.block_id)
        if best is None:
            return None
        price, buyer, block_id = best
        return Action("send_offer", target_lab_id=buyer, block_ids=(block_id,), requested_payment=price,
                      expires_in=1)
