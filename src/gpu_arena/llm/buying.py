"""The short form of a bid: ``send_offer(job_id=...)`` alone.

A bid names the block, its owner, the job it serves, a price and an expiry. ``rule_expert`` picks
the block that adds most to its plan (tempered by the odds that its owner answers) and prices it
from the block's worth to it: a nominal probe while a counter still has time to settle, then a
rising share (:meth:`~gpu_arena.policies.expert.RuleExpertPolicy.buy`). Run 33's trained model did
not copy this: where it and the teacher both bid on the same turn of `coalition_market` validation
(149 turns), it named the teacher's block on 14, and it paid a median 0.14 of the block's worth to
the teacher's 0.39 (decision 0047).

So an LLM agent may write the job alone, and the adapter fills the rest with the teacher's bidding
planner run afresh on the seat's view (:mod:`gpu_arena.llm.shortform`). Afresh is exact here: over
validation seeds 0-99, 350 of the teacher's 352 bids on the three tasks equal the fresh planner's,
and a teacher rebuilt every turn scores as the teacher to the last digit. The full form stays: a
seat may always name its own block and price, and sell.
"""

from __future__ import annotations

from typing import Any

from ..core.types import Action
from .shortform import ShortForm

BID_FORM = "send_offer"


def bid_plan(view: Any) -> Action | None:
    """The bid ``rule_expert``'s planner makes for the seat whose observation is ``view``, or None:
    no block worth bidding for, enough offers open, or money held for its own pool proposal."""
    from ..policies.expert import RuleExpertPolicy

    return RuleExpertPolicy().buy(view)


BID = ShortForm(BID_FORM, bid_plan)


def bid_line(view: Any) -> str | None:
    """The prompt's line naming the bid a short ``send_offer`` would send, or None. Near the reply,
    as the allocation and Pool lines (decision 0037)."""
    plan = BID.planned(view)
    if plan is None:
        return None
    # terse: SmolLM2's single_trade prompt stays within its 600-token budget (test_llm_compact)
    return (f"Bid now: send_offer with job_id {plan.job_id} alone pays {plan.target_lab_id} "
            f"{plan.payment:.2f} for {', '.join(plan.requested_block_ids)}.")


__all__ = ["BID", "BID_FORM", "bid_line", "bid_plan"]
