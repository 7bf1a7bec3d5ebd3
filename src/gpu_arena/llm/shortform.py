"""Short forms: an action written with its job alone, the rest filled by a stateless planner.

A small model copies ids and prices poorly (decisions 0039, 0042, 0047): it names the wrong blocks
and bids a nominal price where ``rule_expert`` computes them from the view's decision aids. So for
a few moves an LLM agent may write the action type and ``job_id`` and nothing else, and the adapter
fills the rest with the planner ``rule_expert`` uses, run afresh on the seat's own view (public facts
and its own jobs, nothing hidden). A short form is offered, and filled, only while its planner has
a plan for that job; the prompt's line says what the plan is. The teacher's moves are written in
the short form exactly where the planner fills them back (:func:`shorten`), and read back unchanged
(:func:`expand`). The full forms stay open. This lives in the LLM adapter: the rules (and their
Rust twin), the HTTP server and the PettingZoo API see ordinary actions.

The forms (:func:`forms`): ``form_coalition`` (:mod:`gpu_arena.llm.pooling`, decision 0042) and
``send_offer`` as a bid (:mod:`gpu_arena.llm.buying`, decision 0047).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from ..core.serialize import coerce_action
from ..core.types import Action
from ..models import ArenaAction

_EMPTY: tuple[Any, ...] = (None, (), [], {}, 0, 0.0, "")
_OTHER_FIELDS = tuple(f.name for f in fields(Action) if f.name not in ("action_type", "job_id"))


@dataclass(frozen=True, slots=True)
class ShortForm:
    """``action_type`` written with ``job_id`` alone, filled by ``plan``: the planner's move of
    that type for the seat whose observation (a core ``SeatView`` or the wire ``ArenaObservation``)
    it is given, or None when it has none. Contract: ``plan`` reads the view only, so the same view
    always gives the same plan, and the plan names a job.

    A turn asks for the plan several times (the grammar's list, the prompt's line, the reply's
    fill), so :meth:`planned` keeps the last view's plan: the view is held by identity, never
    compared, and one view object is one turn's observation, built afresh each turn."""

    action_type: str
    plan: Callable[[Any], Action | None]
    # (view, plan) of the last call; replaced whole, so a reader in another thread sees one pair
    _last: list[tuple[Any, Action | None]] = field(default_factory=list, compare=False, repr=False)

    def planned(self, view: Any) -> Action | None:
        """The plan for ``view`` when it names a job, else None; the planner runs once per view."""
        last = self._last[0] if self._last else None
        if last is not None and last[0] is view:
            return last[1]
        plan = self.plan(view)
        plan = plan if plan is not None and plan.job_id else None
        self._last[:] = [(view, plan)]
        return plan

    def jobs(self, view: Any) -> list[str]:
        """The jobs the short form may name this turn: the planner's, when it has a plan."""
        plan = self.planned(view)
        return [str(plan.job_id)] if plan is not None else []

    def is_short(self, action: Any) -> bool:
        """Whether ``action`` is of this form's type and names its job and nothing else: a field
        written as zero or empty (``"payment": 0``) is written, so that reply is not short (the
        grammar and :func:`~gpu_arena.llm.constrain.fits_ids` read it the same way)."""
        if getattr(action, "action_type", None) != self.action_type or not getattr(action, "job_id", None):
            return False
        written = getattr(action, "model_fields_set", None)  # an ArenaAction knows what its sender wrote
        if written is not None:
            return set(written) <= {"action_type", "job_id"}
        return all(getattr(action, f, None) in _EMPTY for f in _OTHER_FIELDS)

    def expand(self, action: Any, view: Any) -> Any:
        """``action`` filled by the plan for its job when it is this short form; anything else (a
        full form, another action, a format error, a job the planner has no plan for) unchanged:
        the rules then answer it as they answer any incomplete action."""
        if not self.is_short(action):
            return action
        plan = self.planned(view)
        if plan is None or plan.job_id != action.job_id:
            return action
        from .tools import action_arguments

        kind, args = action_arguments(plan)
        return ArenaAction.model_validate({"action_type": kind, **args})

    def shorten(self, action: Any, view: Any) -> Any:
        """A policy's ``action`` written in this short form where the planner fills it back exactly
        (:meth:`expand` of the result equals ``action``); anything else unchanged."""
        if getattr(action, "action_type", None) != self.action_type or self.is_short(action):
            return action
        plan = self.planned(view)
        if plan is None or plan != coerce_action(action):
            return action
        return Action(self.action_type, job_id=plan.job_id)


def forms() -> tuple[ShortForm, ...]:
    """Every short form, in the order they are tried."""
    from .buying import BID
    from .pooling import POOL

    return POOL, BID


def expand(action: Any, view: Any) -> Any:
    """``action`` filled by its short form's planner (:meth:`ShortForm.expand`), or unchanged."""
    for form in forms():
        if form.is_short(action):
            return form.expand(action, view)
    return action


def shorten(action: Any, view: Any) -> Any:
    """``action`` in its short form where the planner fills it back exactly, or unchanged."""
    for form in forms():
        if getattr(action, "action_type", None) == form.action_type:
            return form.shorten(action, view)
    return action


def is_short(action: Any) -> bool:
    """Whether ``action`` is written in one of the short forms."""
    return any(form.is_short(action) for form in forms())


__all__ = ["ShortForm", "expand", "forms", "is_short", "shorten"]
