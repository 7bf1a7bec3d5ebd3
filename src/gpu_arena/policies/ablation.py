"""``without:<step>`` and ``without:<step>:<policy>``: a scripted negotiator with one of its steps
switched off, to measure what that step is worth.

``rule_expert`` decides a turn by trying its steps in order (answer coalitions, answer offers,
propose a pool, pitch, buy, sell) and playing the first that has a move. With one step switched
off it plays the next, so ``gpu-arena eval without:answer_offers --reference rule_expert_short``
gives, paired by world, what answering offers adds over the rest of the policy: where a trained
model falls short of its teacher, this says which of the teacher's moves are worth copying
(decisions 0044 and 0048). The default policy is the teachers' ``rule_expert_short``.
"""

from __future__ import annotations

from typing import Any

from ..core.policy import Policy
from .expert import RuleExpertPolicy

STEPS = RuleExpertPolicy.STEPS  # the steps of its turn, in the order it tries them


def _no_move(*_args: Any, **_kwargs: Any) -> None:
    return None


def without(rest: str, **params: Any) -> Policy:
    """The policy named after the step (``rule_expert_short`` when none is named) with ``step``
    switched off: it never has a move, so the turn goes to the next step."""
    from . import make_policy

    step, _, base = rest.partition(":")
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r} in 'without:{rest}'; steps: {', '.join(STEPS)}")
    base = base or "rule_expert_short"
    policy = make_policy(base, **params)
    if not callable(getattr(policy, step, None)):
        raise ValueError(f"policy {base!r} has no step {step!r}")
    setattr(policy, step, _no_move)  # an instance attribute: the policy's own act() calls it
    setattr(policy, "name", f"without:{step}:{base}")  # noqa: B010  # the ledgers name what played
    return policy


__all__ = ["STEPS", "without"]
