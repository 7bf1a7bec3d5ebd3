"""The short form of a coalition proposal: ``form_coalition(job_id=...)`` alone.

A full proposal names the members, each member's blocks, the seat's own blocks, the shares and a
payment: some twenty ids and numbers that must fit each other (every member asked for a block, the
blocks fitting the job, the payment within budget). ``rule_expert`` computes them with its pooled-job
planner (:class:`~gpu_arena.policies.pooling.CoalitionPooling`, decision 0015); a small model trained
on its moves never copies them, and on ``coalition_market`` forms almost no coalition (0 of 100
validation episodes for an SFT model, where its teacher forms 25), while the teacher's proposals are
worth +0.0044 of return an episode (decision 0041's ablation).

So an LLM agent may write the job alone, as ``allocate_to_job()`` without fields applies the best
plan: the adapter fills the rest with the same planner, run on the seat's own view (public facts
and its own jobs, nothing hidden). The planner is stateless here: it does not remember which labs let
an earlier proposal expire (``rule_expert`` does), so it is offered, and filled, only while it has
a plan (:func:`pool_jobs`); the prompt says what the plan is (:func:`pool_line`). Over validation
seeds 0-99 of ``coalition_market`` every one of ``rule_expert_short``'s 29 proposals equals this
fill, so the teacher's moves are written in the short form (:func:`shorten`) and read back
unchanged (:func:`expand`). The full form stays: a seat may always name its own coalition. This
lives in the LLM adapter (:mod:`gpu_arena.llm.shortform`, which the bid's short form shares): the
rules (and their Rust twin) see an ordinary full proposal.
"""

from __future__ import annotations

from typing import Any

from ..core.types import Action
from .shortform import ShortForm

SHORT_FORM = "form_coalition"


def pool_plan(view: Any) -> Action | None:
    """The proposal the pooled-job planner makes for the seat whose observation is ``view`` (a
    core ``SeatView`` or the wire ``ArenaObservation``), or None: no open pooled job without a
    coalition, no member set with a positive expected gain, or enough proposals already open."""
    from ..policies.expert import RuleExpertPolicy  # the planner's odds and payment are rule_expert's

    if not any(j.pooled for j in view.private_jobs):
        return None  # most turns of most tasks: no pooled job to plan for
    return RuleExpertPolicy().propose_pool(view)


POOL = ShortForm(SHORT_FORM, pool_plan)
pool_jobs, is_short, expand, shorten = POOL.jobs, POOL.is_short, POOL.expand, POOL.shorten


def pool_line(view: Any) -> str | None:
    """The prompt's line naming the plan a short ``form_coalition`` would propose, or None. Near
    the reply, as the allocation line: a small model ignored aids several hundred tokens up
    (decision 0037)."""
    plan = POOL.planned(view)
    if plan is None:
        return None
    owners = {b.block_id: str(b.owner) for b in view.public_market.blocks}
    asked = [owners.get(b, "") for b in plan.requested_block_ids]
    members = ", ".join(f"{lab} {asked.count(lab)}" for lab in plan.member_lab_ids)
    return (f"Pool now: form_coalition with job_id {plan.job_id} alone asks {members} blocks with "
            f"{len(plan.block_ids)} of yours, paying {plan.payment:.2f}, open {plan.expires_in} rounds.")


__all__ = ["POOL", "SHORT_FORM", "expand", "is_short", "pool_jobs", "pool_line", "pool_plan", "shorten"]
