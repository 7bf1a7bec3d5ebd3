"""Wire models (pydantic) for the OpenEnv contract: ArenaAction, ArenaObservation, ArenaState.

Field names are the public contract (they keep the reference environment's names). The models
check types; the rules check meaning (payment sign and size, list lengths, ids), so that a
well-typed but bad action still reaches the environment and comes back as a structured error in
the observation, with a penalty, instead of an exception.

The observation's nested parts are the core's view dataclasses themselves (pydantic validates
and serialises stdlib dataclasses), so the core view and the wire model cannot drift apart and
building an observation does not copy the view a second time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import Field, ValidationError

from ._openenv_contract import Action, Observation, State
from .core.serialize import coerce_action
from .core.types import ACTION_TYPES, REWARD_COLUMNS, RejectedAction
from .core.types import Action as CoreAction
from .core.views import (
    BlockView,
    CoalitionView,
    JobView,
    LabView,
    MarketView,
    MessageView,
    OfferView,
    ResultView,
    SeatView,
)

ActionType = Literal[
    "send_offer", "accept_offer", "reject_offer", "counter_offer", "make_pitch", "counter_pitch",
    "reserve_capacity", "release_capacity", "form_coalition", "commit_to_coalition", "allocate_to_job",
    "send_message", "wait", "finish",
]
# the wire's literal and the core's tuple are one list of action types (a static type needs the literal)
assert get_args(ActionType) == ACTION_TYPES, "ActionType and core.types.ACTION_TYPES disagree"


class ArenaAction(Action):
    """One seat's action for one round. Only the fields an action type uses are read.

    - ``send_offer``: target_lab_id, block_ids (yours, offered), requested_block_ids (theirs),
      payment (you pay) or requested_payment (they pay), expires_in, conditions, job_id (your job
      that receives the requested blocks on settlement), message.
    - ``accept_offer`` / ``reject_offer``: offer_id (accept: optional job_id for received blocks;
      reject on your own offer withdraws it). ``counter_offer``: offer_id + the terms of send_offer.
    - ``make_pitch``: payment (bid), job_id, message. ``counter_pitch``: target_lab_id, payment above
      theirs, message.
    - ``reserve_capacity``: block_ids, job_id. ``release_capacity``: block_ids (releasing a
      coalition-committed block is a breach).
    - ``form_coalition``: job_id (your pooled job), member_lab_ids, block_ids (yours),
      requested_block_ids (members'), shares (every member and you, summing to 1), payment,
      expires_in. ``commit_to_coalition``: coalition_id.
    - ``allocate_to_job``: job_id + block_ids; with neither, applies your whole best plan, less
      the blocks you committed to a coalition still gathering consents.
    - ``send_message``: message, optional target_lab_id (else broadcast). ``wait``. ``finish``.
    """

    action_type: ActionType = Field(description="which of the 14 action types")
    target_lab_id: str | None = Field(default=None, description="the other lab (offers, pitches, messages)")
    offer_id: str | None = None
    coalition_id: str | None = None
    block_ids: list[str] = Field(default_factory=list, description="your blocks (offered, allocated, ...)")
    requested_block_ids: list[str] = Field(default_factory=list, description="the other side's blocks you ask for")
    job_id: str | None = None
    payment: float | None = Field(default=None, description="money you pay (>= 0, within budget)")
    requested_payment: float | None = Field(default=None, description="money you ask the target to pay (>= 0)")
    message: str | None = None
    conditions: dict[str, Any] | None = Field(
        default=None, description="offer conditions: must_allocate_to_job, no_resale, coalition_only (booleans)")
    member_lab_ids: list[str] = Field(default_factory=list, description="coalition members other than you")
    shares: dict[str, float] | None = Field(default=None, description="coalition value split, summing to 1")
    expires_in: int | None = Field(default=None, description="rounds an offer or proposal stays open")


def _zero_breakdown() -> dict[str, float]:
    return dict.fromkeys(REWARD_COLUMNS, 0.0)


class ArenaObservation(Observation):
    """One seat's view after a step. ``reward_breakdown`` always carries all 11 reward columns.

    Decision aids are the seat's own numbers from the grader's valuation: ``batna`` (utility if
    it trades no more), ``surplus_over_batna``, ``best_plan``, ``marginal_value`` of each block and
    ``value_to_me`` of each open offer. Nothing here is another lab's private value.

    ``metadata`` (the environment's bookkeeping, not the seat's view) holds the episode's id,
    ``seed``, ``task``, ``split``, ``step`` and ``engine``: which engine plays the episode and why
    (``ArenaState.engine``'s form); the server adds ``replay_id`` at the end.
    """

    task: str = ""
    split: str = ""
    round_index: int = 0
    max_rounds: int = 0
    controlled_lab_id: str = ""
    controlled_lab_budget: float = 0.0
    controlled_lab_reputation: float = 0.0
    private_jobs: list[JobView] = Field(default_factory=list)
    owned_blocks: list[BlockView] = Field(default_factory=list)
    public_market: MarketView = Field(default_factory=lambda: MarketView((), (), (), ()))
    visible_labs: list[LabView] = Field(default_factory=list)
    active_offers: list[OfferView] = Field(default_factory=list)
    active_coalitions: list[CoalitionView] = Field(default_factory=list)
    message_history: list[MessageView] = Field(default_factory=list)
    last_action_result: ResultView = Field(default_factory=lambda: ResultView(True, "ok", ""))
    reward_breakdown: dict[str, float] = Field(default_factory=_zero_breakdown)
    batna: float = 0.0
    surplus_over_batna: float = 0.0
    best_plan: dict[str, list[str]] = Field(default_factory=dict)
    reward_scale: float = 1.0


class ArenaState(State):
    """The full world (all labs' budgets, jobs and values; all blocks, offers, coalitions).

    For orchestration, replays and debugging only: it is the god view and must not be shown to
    a seat.
    """

    task: str = ""
    split: str = ""
    seed: int | None = None
    controlled_lab_id: str = ""
    round_index: int = 0
    max_rounds: int = 0
    done: bool = False
    world: dict[str, Any] = Field(default_factory=dict)
    engine: dict[str, Any] | None = Field(
        default=None, description="which engine plays the episode: {playing: rust | python, reason: why the "
                                  "Python core plays it (null while Rust does), moved: it moved there from Rust, "
                                  "rust_rounds} (gpu_arena.native.report.EngineReport); null before reset")


def observation_from_view(view: SeatView, *, metadata: dict[str, Any] | None = None) -> ArenaObservation:
    """Wrap a core SeatView in the wire model (its nested views are shared: they are frozen values)."""
    obs = ArenaObservation.model_validate(view, from_attributes=True)
    if metadata:
        obs.metadata = metadata
    return obs


def read_action(action: Any) -> CoreAction | RejectedAction:
    """Any form a client may send one action in — an ``ArenaAction``, a core ``Action``, a mapping,
    a JSON string or bytes — as a core action, or a ``RejectedAction`` with a stable code
    (``malformed_action``, ``unknown_action_type``, ``unknown_field``, ``invalid_type``) that the
    engine books as an invalid move. Never raises."""
    if isinstance(action, RejectedAction):
        return action  # already refused upstream (an LLM agent's format error): keep its own code
    if isinstance(action, str | bytes):
        try:
            action = json.loads(action)
        except (ValueError, TypeError) as e:
            return RejectedAction("malformed_action", f"action is not valid JSON: {e}")
        except RecursionError:  # nesting deeper than the interpreter's stack (about 1,000 levels)
            return RejectedAction("malformed_action", "action is not valid JSON: nested too deeply")
    if isinstance(action, Mapping) and not isinstance(action, ArenaAction):
        try:
            action = ArenaAction.model_validate(dict(action))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            code = "unknown_action_type" if where == "action_type" and first.get("type") == "literal_error" \
                else "unknown_field" if first.get("type") == "extra_forbidden" else "invalid_type"
            return RejectedAction(code, f"{where or 'action'}: {first.get('msg', 'invalid')}")
    return coerce_action(action)
