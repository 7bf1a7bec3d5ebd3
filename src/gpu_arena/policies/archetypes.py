"""The five opponent archetypes (docs/design.md), each a :class:`Negotiator` with its own bent.

A world draws each lab's parameters from its split's ranges (holdout ranges differ); an archetype
then leans them its own way, so a selfish lab in a holdout world is selfish *and* drawn from the
holdout distribution.
"""

from __future__ import annotations

from typing import Any

from ..core.types import Action, CoalitionStatus, JobStatus
from ..core.worldgen import ARCHETYPES as ARCHETYPE_NAMES
from .negotiator import Negotiator


class CooperativePolicy(Negotiator):
    """Accepts fair Pareto-improving deals, commits to coalitions readily, tells the truth."""

    name = "cooperative"

    def __init__(self, seed: int = 0, acceptance_margin: float = 0.08, coalition_trust: float = 0.7,
                 **params: Any) -> None:
        params.pop("honesty", None)
        super().__init__(seed, acceptance_margin=acceptance_margin * 0.3, coalition_trust=min(1.0, coalition_trust * 1.4),
                         honesty=1.0, **params)


class SelfishPolicy(Negotiator):
    """Wants a large share of every deal: rejects low-margin offers, counters for more money."""

    name = "selfish"

    def __init__(self, seed: int = 0, acceptance_margin: float = 0.08, coalition_trust: float = 0.7,
                 risk: float = 0.5, **params: Any) -> None:
        super().__init__(seed, acceptance_margin=max(0.3, acceptance_margin * 3.0),
                         coalition_trust=coalition_trust * 0.5, risk=risk * 0.6, **params)


class DeadlinePanickedPolicy(Negotiator):
    """Calm early, desperate late: its margin melts and its bids rise as its deadlines near."""

    name = "deadline_panicked"

    def __init__(self, seed: int = 0, deadline_sensitivity: float = 1.0, **params: Any) -> None:
        super().__init__(seed, deadline_sensitivity=max(2.0, deadline_sensitivity * 2.5), **params)


class DeceptivePolicy(Negotiator):
    """Misreports its demand in messages and pitches, and may walk out of a weak coalition when that
    pays. It never breaks a server rule: every action it takes is validated like anyone's."""

    name = "deceptive"

    def __init__(self, seed: int = 0, honesty: float = 0.5, coalition_trust: float = 0.7, **params: Any) -> None:
        super().__init__(seed, honesty=honesty * 0.4, coalition_trust=coalition_trust * 0.6, **params)

    def act(self, obs: Any) -> Action:
        defect = self.defect(obs)
        return defect if defect is not None else super().act(obs)

    def defect(self, obs: Any) -> Action | None:
        """Withdraw from a formed coalition whose pool cannot complete the job, if the blocks are worth
        more back home (a breach: reputation and reward pay for it)."""
        me = obs.controlled_lab_id
        owned = {b.block_id: b for b in obs.owned_blocks}
        for c in obs.active_coalitions:
            if c.status != CoalitionStatus.FORMED or me not in c.members or c.proposer == me:
                continue
            if c.pooled_hours >= c.gpu_hours_required or self.rng.random() < self.coalition_trust:
                continue
            mine = [b for b in c.commitments.get(me, []) if b in owned and owned[b].status == "committed"
                    and owned[b].start_round > obs.round_index]
            if mine:
                return Action("release_capacity", block_ids=tuple(mine))
        return None

    def talk(self, obs: Any) -> Action | None:
        if obs.round_index % 3 != 1:
            return None
        jobs = [j for j in obs.private_jobs if j.status == JobStatus.OPEN]
        if not jobs:
            return None
        need = sum(j.gpu_hours_required - j.assigned_hours for j in jobs)  # int sum: GPU-hours
        if self.rng.random() >= self.honesty:
            need = need * 2 + 8  # inflate demand to talk prices up
        return Action("send_message", message=f"We still need {need} GPU-hours and will pay well for them.")


class RetaliatoryPolicy(Negotiator):
    """Punishes: refuses any lab that breached a commitment or sent it an exploitative offer, for
    ``retaliation_memory`` rounds (longer than the others)."""

    name = "retaliatory"

    def __init__(self, seed: int = 0, retaliation_memory: float = 3.0, **params: Any) -> None:
        super().__init__(seed, retaliation_memory=max(3.0, retaliation_memory * 1.5), **params)

    def answer_offers(self, obs: Any) -> Action | None:
        for o in obs.active_offers:
            # an offer worth less than nothing to it is an insult, remembered
            if o.direction == "incoming" and o.value_to_me < 0:
                self.grudges[o.sender] = obs.round_index + int(self.retaliation_memory)
        return super().answer_offers(obs)


# the policy of each archetype a world assigns (core.worldgen.ARCHETYPES names them, in its order)
ARCHETYPES: dict[str, type[Negotiator]] = dict(zip(ARCHETYPE_NAMES, (
    CooperativePolicy, SelfishPolicy, DeadlinePanickedPolicy, DeceptivePolicy, RetaliatoryPolicy), strict=True))
