"""Baselines for result tables (docs/design.md): greedy_hoarder, always_accept, rule_expert, oracle.

(``random_valid``, ``no_negotiation`` and ``wait`` live in :mod:`gpu_arena.core.policy`;
``rule_expert`` and ``oracle`` in :mod:`gpu_arena.policies.expert`.)
"""

from __future__ import annotations

from typing import Any

from ..core.types import Action, CoalitionStatus
from .expert import RuleExpertPolicy
from .negotiator import Negotiator
from .oracle import OraclePolicy

__all__ = ["AlwaysAcceptPolicy", "GreedyHoarderPolicy", "OraclePolicy", "RuleExpertPolicy"]


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
            if c.status == CoalitionStatus.PROPOSED and me in c.members and me not in c.consented:
                return Action("commit_to_coalition", coalition_id=c.coalition_id)
        return None

    def pitch(self, obs: Any) -> Action | None:
        return None

    def propose_coalition(self, obs: Any) -> Action | None:
        return None

    def buy(self, obs: Any) -> Action | None:
        return None
