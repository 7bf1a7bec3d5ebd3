"""Plain data of the GPU economy: blocks, jobs, labs, offers, coalitions, auctions, actions.

Everything here is a mutable dataclass owned by one :class:`World`. The rules in
:mod:`gpu_arena.core.rules` are the only code that mutates a world; views copy what a seat may see.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

ACTION_TYPES: tuple[str, ...] = (
    "send_offer",
    "accept_offer",
    "reject_offer",
    "counter_offer",
    "make_pitch",
    "counter_pitch",
    "reserve_capacity",
    "release_capacity",
    "form_coalition",
    "commit_to_coalition",
    "allocate_to_job",
    "send_message",
    "wait",
    "finish",
)

COMPONENT_COLUMNS: tuple[str, ...] = (
    "job_utility_score",
    "deal_quality_score",
    "coalition_reliability_score",
    "judge_argument_score",
    "budget_efficiency_score",
    "negotiation_efficiency_score",
    "market_adaptation_score",
)
PENALTY_COLUMNS: tuple[str, ...] = ("invalid_action_penalty", "spam_penalty", "breach_penalty")
REWARD_COLUMNS: tuple[str, ...] = (*COMPONENT_COLUMNS, *PENALTY_COLUMNS, "normalized_reward")

CONDITION_KEYS: tuple[str, ...] = ("must_allocate_to_job", "no_resale", "coalition_only")

SHOCK_KINDS: tuple[str, ...] = (
    "capacity_failure",
    "new_supply",
    "energy_spike",
    "reliability_downgrade",
    "deadline_acceleration",
    "demand_surge",
    "emergency_auction",
)

TASKS: tuple[str, ...] = ("single_trade", "market_round", "coalition_market")
MAX_SEED = 2**63 - 1  # the largest seed anything accepts: every store keeps seeds as signed 64-bit integers
SPLITS: tuple[str, ...] = ("train", "holdout")


class BlockStatus:
    """Life cycle of a block. Only ``FREE`` and ``RESERVED`` blocks are the owner's to trade or plan."""

    FREE = "free"
    RESERVED = "reserved"  # earmarked for one of the owner's jobs; cannot be offered or committed
    ALLOCATED = "allocated"  # will run for one of the owner's jobs; energy prepaid
    COMMITTED = "committed"  # held by the server for a formed coalition's pooled job
    RUNNING = "running"
    DONE = "done"
    IDLE = "idle"  # window started with no job: capacity wasted
    FAILED = "failed"  # destroyed by a capacity-failure shock
    AUCTION = "auction"  # offered by the market in an emergency auction; no owner yet


class JobStatus:
    """Life cycle of a job: open until its deadline or completion, then settled as one of the rest."""

    OPEN = "open"
    COMPLETED = "completed"
    PARTIAL = "partial"  # settled with partial credit
    FAILED = "failed"


class OfferStatus:
    """Life cycle of an offer. Only ``OPEN`` offers can be accepted, countered or rejected."""

    OPEN = "open"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    EXPIRED = "expired"
    COUNTERED = "countered"  # replaced by a counter-offer
    SUPERSEDED = "superseded"  # a block it names moved, started or was committed
    WITHDRAWN = "withdrawn"  # its sender took it back (or finished)


class CoalitionStatus:
    """Life cycle of a coalition proposal for a pooled job."""

    PROPOSED = "proposed"  # gathering consents
    FORMED = "formed"
    EXPIRED = "expired"
    FAILED = "failed"  # could not form (a committed block went, a member could not pay)
    SETTLED = "settled"  # its job was settled


class AuctionStatus:
    """Life cycle of an emergency auction."""

    OPEN = "open"
    AWARDED = "awarded"
    UNSOLD = "unsold"


PLANNABLE = frozenset({BlockStatus.FREE, BlockStatus.RESERVED})
ASSIGNED = frozenset({BlockStatus.ALLOCATED, BlockStatus.COMMITTED, BlockStatus.RUNNING, BlockStatus.DONE})


@dataclass(slots=True)
class Block:
    """A GPU block: ``gpu_count`` GPUs for rounds ``[start_round, start_round + duration)``.

    Public: everything but ``job_id`` of another lab's block. Tradeable only while
    ``round_index < start_round`` and status is FREE.
    """

    block_id: str
    owner: str | None
    gpu_count: int
    start_round: int
    duration: int
    reliability: float
    energy_cost: float  # money per GPU-hour, paid when the block is allocated (prepaid, refunded if it fails)
    status: str = BlockStatus.FREE
    job_id: str | None = None
    reserved_for: str | None = None
    coalition_id: str | None = None
    no_resale: bool = False  # set by an accepted offer's condition: the receiver may not offer it on
    must_allocate: bool = False  # set by an accepted offer's condition: must run for a job or it is a breach
    energy_paid: float = 0.0

    @property
    def hours(self) -> int:
        return self.gpu_count * self.duration

    @property
    def end_round(self) -> int:
        return self.start_round + self.duration


@dataclass(slots=True)
class Job:
    """A lab's private job. Completes when valid assigned blocks give ``gpu_hours_required``.

    A block counts if it is not failed or idle, its window ends by ``deadline_round`` and its
    reliability is at least ``min_reliability``. Short of completion the job pays
    ``value * partial_credit * hours / required``.
    """

    job_id: str
    owner: str
    gpu_hours_required: int
    deadline_round: int
    value: float
    min_reliability: float
    partial_credit: float
    pooled: bool = False  # too large for its owner alone: public, so others can be asked to pool
    status: str = JobStatus.OPEN
    realized_value: float = 0.0
    surged: bool = False
    coalition_id: str | None = None  # a formed coalition that pools capacity for this job


@dataclass(slots=True)
class Lab:
    """A player. ``budget`` and ``reputation`` are public; jobs are private to the lab."""

    lab_id: str
    budget: float
    reputation: float
    initial_budget: float
    archetype: str = "cooperative"  # the opponent policy that plays this lab when it is not controlled
    params: dict[str, float] = field(default_factory=dict)  # opponent parameters, drawn per split
    finished: bool = False
    realized_value: float = 0.0
    energy_paid: float = 0.0
    # counters read by metrics
    actions: int = 0
    invalid_actions: int = 0
    offers_made: int = 0
    offers_received: int = 0
    deals: int = 0
    commitments: int = 0
    breaches: int = 0
    last_signature: tuple[Any, ...] | None = None  # the last action, for spam detection


@dataclass(slots=True)
class Offer:
    offer_id: str
    sender: str
    target: str
    block_ids: tuple[str, ...]  # sender's blocks that go to the target
    requested_block_ids: tuple[str, ...]  # target's blocks that go to the sender
    payment: float  # money sender -> target (negative: target pays sender)
    created_round: int
    expires_round: int  # the offer can be accepted while round_index < expires_round
    conditions: dict[str, bool] = field(default_factory=dict)
    message: str = ""
    status: str = OfferStatus.OPEN
    parent_offer_id: str | None = None
    settled_round: int | None = None
    requested_payment: float = 0.0  # money target -> sender
    job_id: str | None = None  # sender's job that requested blocks are allocated to on settlement


@dataclass(slots=True)
class Coalition:
    """A pooled-capacity contract for one pooled job. Forms only when every member consents."""

    coalition_id: str
    proposer: str
    members: tuple[str, ...]  # includes the proposer
    job_id: str
    commitments: dict[str, tuple[str, ...]]  # lab -> blocks it commits
    payment: float  # proposer pays this into the pool at formation, split by committed GPU-hours
    shares: dict[str, float]  # lab -> share of the pooled job's realised value
    created_round: int
    expires_round: int  # consent must be complete while round_index < expires_round
    consented: set[str] = field(default_factory=set)
    status: str = CoalitionStatus.PROPOSED
    breaches: list[str] = field(default_factory=list)
    excused: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Pitch:
    lab_id: str
    bid: float
    job_id: str | None
    message: str
    round_index: int
    counter_to: str | None = None
    score: float | None = None  # the judge's score, once the auction is resolved in judge mode
    reasons: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Auction:
    """A contested resource: a block the market sells to the best pitch when ``close_round`` arrives."""

    auction_id: str
    block_id: str
    opened_round: int
    close_round: int
    pitches: dict[str, Pitch] = field(default_factory=dict)
    status: str = AuctionStatus.OPEN
    winner: str | None = None
    price: float = 0.0


@dataclass(slots=True)
class Message:
    round_index: int
    sender: str
    target: str | None  # None: broadcast
    text: str


@dataclass(slots=True)
class Event:
    """A public announcement (shocks, settled deals, coalitions, auctions), shown when it happens."""

    round_index: int
    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ScheduledShock:
    round_index: int
    kind: str
    magnitude: float


@dataclass(slots=True)
class Action:
    """One seat's action. Field names follow the wire contract (``gpu_arena.models.ArenaAction``).

    ``requested_payment``, ``member_lab_ids``, ``shares`` and ``expires_in`` extend the reference
    contract: money asked of the target (payments are never negative), coalition terms and expiry.
    """

    action_type: str = "wait"
    target_lab_id: str | None = None
    offer_id: str | None = None
    coalition_id: str | None = None
    block_ids: tuple[str, ...] = ()
    requested_block_ids: tuple[str, ...] = ()
    job_id: str | None = None
    payment: float | None = None
    requested_payment: float | None = None
    message: str | None = None
    conditions: dict[str, Any] | None = None
    member_lab_ids: tuple[str, ...] = ()
    shares: dict[str, float] | None = None
    expires_in: int | None = None


@dataclass(slots=True, frozen=True)
class RejectedAction:
    """An action that could not even be read (malformed JSON, wrong types). Stepping it spends the
    seat's turn as a wait with an ``invalid_action_penalty`` and the error ``code``."""

    code: str
    message: str


@dataclass(slots=True, frozen=True)
class ActionResult:
    ok: bool
    code: str
    message: str


OK = ActionResult(True, "ok", "")


@dataclass(slots=True)
class TaskParams:
    """Ranges for one task and split. Holdout uses different opponent and shock ranges."""

    task: str
    split: str
    n_labs: tuple[int, int]
    rounds: tuple[int, int]
    jobs_per_lab: tuple[int, int]
    blocks_per_lab: tuple[int, int]
    n_shocks: tuple[int, int]
    shock_weights: dict[str, float]
    energy_spike: tuple[float, float]
    demand_surge: tuple[float, float]
    reliability_drop: tuple[float, float]
    budget_frac: tuple[float, float]
    pooled_jobs: int
    opponent_ranges: dict[str, tuple[float, float]]
    value_per_hour_cap: float


@dataclass(slots=True)
class World:
    """The whole state of one episode. Deterministic given (task, split, seed, actions)."""

    task: str
    split: str
    seed: int
    max_rounds: int
    params: TaskParams
    rng: random.Random
    labs: dict[str, Lab]
    blocks: dict[str, Block]
    jobs: dict[str, Job]
    shock_schedule: list[ScheduledShock]
    round_index: int = 0
    offers: dict[str, Offer] = field(default_factory=dict)
    coalitions: dict[str, Coalition] = field(default_factory=dict)
    auctions: dict[str, Auction] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    done: bool = False
    next_id: int = 0
    initial_potential: dict[str, float] = field(default_factory=dict)
    reward_scale: dict[str, float] = field(default_factory=dict)
    judge_mode: str = "none"
    version: int = 0  # bumped by the engine after every event; keys its valuation caches

    def new_id(self, prefix: str) -> str:
        self.next_id += 1
        return f"{prefix}_{self.next_id}"

    def lab_ids(self) -> list[str]:
        return list(self.labs)
