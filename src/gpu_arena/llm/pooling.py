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
lives in the LLM adapter: the rules (and their Rust twin) see an ordinary full proposal.
"""

from __future__ import annotations

from typing import Any

from ..core.serialize import coerce_action
from ..core.types import Action
from ..models import ArenaAction

SHORT_FORM = "form_coalition"


def pool_plan(view: Any) -> Action | None:
    """The proposal the pooled-job planner makes for the seat whose observation is ``view`` (a
    core ``SeatView`` or the wire ``ArenaObservation``), or None: no open pooled job without a
    coalition, no member set with a positive expected gain, or enough proposals already open."""
    from ..policies.expert import RuleExpertPolicy  # the planner's odds and payment are rule_expert's

    if not any(j.pooled for j in view.private_jobs):
        return None  # most turns of most tasks: no pooled job to plan for
    return RuleExpertPolicy().propose_pool(view)


def pool_jobs(view: Any) -> list[str]:
    """The jobs a short ``form_coalition`` may name this turn: the planner's, when it has a plan."""
    plan = pool_plan(view)
    return [str(plan.job_id)] if plan is not None else []


_OTHER_FIELDS = ("member_lab_ids", "block_ids", "requested_block_ids", "shares", "payment", "expires_in", "message")


def is_short(action: Any) -> bool:
    """Whether ``action`` is a ``form_coalition`` that names its job and nothing else: a field
    written as zero or empty (``"payment": 0``) is written, so that reply is not short (the
    grammar and :func:`~gpu_arena.llm.constrain.fits_ids` read it the same way)."""
    if getattr(action, "action_type", None) != SHORT_FORM or not getattr(action, "job_id", None):
        return False
    written = getattr(action, "model_fields_set", None)  # an ArenaAction knows what its sender wrote
    if written is not None:
        return set(written) <= {"action_type", "job_id"}
    return all(getattr(action, f, None) in (None, (), [], {}, 0, 0.0, "") for f in _OTHER_FIELDS)


def expand(action: Any, view: Any) -> Any:
    """``action`` with a short ``form_coalition`` filled by the planner's proposal for its job;
    anything else (a full proposal, another action, a format error, a job the planner has no plan
    for) unchanged: the rules then answer it as they answer any incomplete proposal."""
    if not is_short(action):
        return action
    plan = pool_plan(view)
    if plan is None or plan.job_id != action.job_id:
        return action
    from .tools import action_arguments

    kind, args = action_arguments(plan)
    return ArenaAction.model_validate({"action_type": kind, **args})


def shorten(action: Any, view: Any) -> Any:
    """A policy's ``action`` written in the short form where the planner fills it back exactly
    (:func:`expand` of the result equals ``action``); anything else unchanged."""
    if getattr(action, "action_type", None) != SHORT_FORM or is_short(action):
        return action
    plan = pool_plan(view)
    if plan is None or plan != coerce_action(action):
        return action
    return Action(SHORT_FORM, job_id=plan.job_id)


def pool_line(view: Any) -> str | None:
    """The prompt's line naming the plan a short ``form_coalition`` would propose, or None. Near
    the reply, as the allocation line: a small model ignored aids several hundred tokens up
    (decision 0037)."""
    plan = pool_plan(view)
    if plan is None:
        return None
    owners = {b.block_id: str(b.owner) for b in view.public_market.blocks}
    asked = [owners.get(b, "") for b in plan.requested_block_ids]
    members = ", ".join(f"{lab} {asked.count(lab)}" for lab in plan.member_lab_ids)
    return (f"Pool now: form_coalition with job_id {plan.job_id} alone asks {members} blocks with "
            f"{len(plan.block_ids)} of yours, paying {plan.payment:.2f}, open {plan.expires_in} rounds.")


__all__ = ["SHORT_FORM", "expand", "is_short", "pool_jobs", "pool_line", "pool_plan", "shorten"]
