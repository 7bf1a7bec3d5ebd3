"""Wire models (pydantic) for the OpenEnv contract: ArenaAction, ArenaObservation, ArenaState.

Field names are the public contract (they keep the reference environment's names). The models
check types; the rules check meaning (payment sign and size, list lengths, ids), so that a
well-typed but bad action still reaches the environment and comes back as a structured error in
the observation, with a penalty, instead of an exception.
"""

from __future__ import annotations

from typing import Any, Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field

from .core.types import REWARD_COLUMNS
from .core.views import SeatView

ActionType = Literal[
    "send_offer", "accept_offer", "reject_offer", "counter_offer", "make_pitch", "counter_pitch",
    "reserve_capacity", "release_capacity", "form_coalition", "commit_to_coalition", "allocate_to_job",
    "send_message", "wait", "finish",
]


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
    - ``allocate_to_job``: job_id + block_ids; with neither, applies your whole best plan.
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


class _View(BaseModel):
    model_config = ConfigDict(from_attributes=True, extra="forbid")


class JobModel(_View):
    job_id: str
    gpu_hours_required: int
    deadline_round: int
    value: float
    min_reliability: float
    partial_credit: float
    pooled: bool
    status: str
    assigned_hours: int
    realized_value: float
    coalition_id: str | None
    share: float


class BlockModel(_View):
    block_id: str
    owner: str | None
    gpu_count: int
    start_round: int
    duration: int
    end_round: int
    gpu_hours: int
    reliability: float
    energy_cost: float
    status: str
    tradeable: bool
    job_id: str | None = None
    reserved_for: str | None = None
    coalition_id: str | None = None
    no_resale: bool = False
    must_allocate: bool = False
    marginal_value: float | None = None


class OfferModel(_View):
    offer_id: str
    sender: str
    target: str
    direction: str
    block_ids: list[str]
    requested_block_ids: list[str]
    payment: float
    requested_payment: float
    created_round: int
    expires_round: int
    conditions: dict[str, bool]
    message: str
    status: str
    parent_offer_id: str | None
    value_to_me: float


class CoalitionModel(_View):
    coalition_id: str
    proposer: str
    members: list[str]
    job_id: str
    gpu_hours_required: int
    deadline_round: int
    commitments: dict[str, list[str]]
    payment: float
    shares: dict[str, float]
    expires_round: int
    consented: list[str]
    status: str
    pooled_hours: int
    breaches: list[str]
    excused: list[str]


class LabModel(_View):
    lab_id: str
    budget: float
    reputation: float
    n_blocks: int
    finished: bool


class MessageModel(_View):
    round_index: int
    sender: str
    target: str | None
    text: str


class EventModel(_View):
    round_index: int
    kind: str
    text: str


class PitchModel(_View):
    lab_id: str
    bid: float
    job_id: str | None
    message: str
    round_index: int
    counter_to: str | None


class AuctionModel(_View):
    auction_id: str
    block_id: str
    opened_round: int
    close_round: int
    status: str
    pitches: list[PitchModel]
    winner: str | None
    price: float


class PooledJobModel(_View):
    job_id: str
    owner: str
    gpu_hours_required: int
    deadline_round: int
    min_reliability: float
    status: str


class MarketModel(_View):
    blocks: list[BlockModel] = Field(default_factory=list)
    auctions: list[AuctionModel] = Field(default_factory=list)
    pooled_jobs: list[PooledJobModel] = Field(default_factory=list)
    events: list[EventModel] = Field(default_factory=list)


class ActionResultModel(_View):
    ok: bool = True
    code: str = "ok"
    message: str = ""


def _zero_breakdown() -> dict[str, float]:
    return dict.fromkeys(REWARD_COLUMNS, 0.0)


class ArenaObservation(Observation):
    """One seat's view after a step. ``reward_breakdown`` always carries all 11 reward columns.

    Decision aids are the seat's own numbers from the grader's valuation: ``batna`` (utility if
    it trades no more), ``surplus_over_batna``, ``best_plan``, ``marginal_value`` of each block and
    ``value_to_me`` of each open offer. Nothing here is another lab's private value.
    """

    task: str = ""
    split: str = ""
    round_index: int = 0
    max_rounds: int = 0
    controlled_lab_id: str = ""
    controlled_lab_budget: float = 0.0
    controlled_lab_reputation: float = 0.0
    private_jobs: list[JobModel] = Field(default_factory=list)
    owned_blocks: list[BlockModel] = Field(default_factory=list)
    public_market: MarketModel = Field(default_factory=MarketModel)
    visible_labs: list[LabModel] = Field(default_factory=list)
    active_offers: list[OfferModel] = Field(default_factory=list)
    active_coalitions: list[CoalitionModel] = Field(default_factory=list)
    message_history: list[MessageModel] = Field(default_factory=list)
    last_action_result: ActionResultModel = Field(default_factory=ActionResultModel)
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


def observation_from_view(view: SeatView, *, metadata: dict[str, Any] | None = None) -> ArenaObservation:
    """Copy a core SeatView into the wire model (validated, so the contract is checked every time)."""
    obs = ArenaObservation.model_validate(view, from_attributes=True)
    if metadata:
        obs.metadata = metadata
    return obs
