"""The prompt's ``Take now:`` line: the incoming offer ``rule_expert`` would accept this turn.

On `single_trade` the teacher's answers are most of what it is worth: ``rule_expert_short`` with
its answers to offers switched off (``without:answer_offers``) loses 0.0969 [0.0681, 0.1269] a
`single_trade` episode on validation seeds 0-99, without its bids 0.0402, without its sales
nothing (decision 0048). It takes an offer by its
own pricing of the whole deal (:meth:`~gpu_arena.policies.expert.RuleExpertPolicy.offer_value`:
a block of its own left idle by the answer, its other bids settling too), above a threshold that
grows with what is at stake, where the prompt shows each offer's ``value_to_me`` alone. So the
line names the offer that pricing takes and the job its blocks go to, near the reply as the Bid
and Pool lines (decision 0037); whether to take it now or allocate first stays the model's move.

Afresh is exact here: over validation seeds 0-99 of the three tasks, each of the teacher's 176
accepts is the one a teacher built afresh on that view would make (decision 0048).
"""

from __future__ import annotations

from typing import Any

from ..core.types import Action


def take_plan(view: Any) -> Action | None:
    """The ``accept_offer`` ``rule_expert``'s answer to offers makes for the seat whose observation
    is ``view``, or None: no incoming offer worth its price to it (its answer may be a counter)."""
    from ..policies.expert import RuleExpertPolicy

    if not any(o.direction == "incoming" for o in view.active_offers):
        return None  # most turns: nothing to answer
    plan = RuleExpertPolicy().answer_offers(view)
    return plan if plan is not None and plan.action_type == "accept_offer" else None


def take_line(view: Any) -> str | None:
    """The prompt's line naming the offer to take, or None."""
    plan = take_plan(view)
    if plan is None:
        return None
    job = f" with job_id {plan.job_id}" if plan.job_id else ""
    return f"Take now: accept_offer {plan.offer_id}{job}."


__all__ = ["take_line", "take_plan"]
