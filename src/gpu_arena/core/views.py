"""What one seat may see (PettingZoo's per-agent view): immutable values, plus a text rendering.

A view holds the seat's own private jobs and blocks, the public market (other labs' blocks with
public attributes, pooled-job calls without values, auctions, announcements), offers and
coalitions that involve the seat, messages addressed to it or broadcast, and its own decision
aids priced by the grader's valuation. Another lab's job values never enter a view.

Views are values (docs/design.md, "Contracts"): frozen dataclasses holding tuples and read-only
mappings, so one view of a state may be shared by everyone who reads it and nothing reachable
from it can change the world. :mod:`gpu_arena.core.observe` builds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, NoReturn, TypeVar, dataclass_transform

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def value(cls: type[T]) -> type[T]:
    """A frozen, slotted dataclass whose ``__init__`` writes each slot directly.

    A frozen dataclass's own ``__init__`` goes around its guard once per field through
    ``object.__setattr__``, which makes a view of 18 fields cost six times a mutable one; this one
    calls each slot's own setter (about half the cost). Slots keep a view to one object for the
    garbage collector, not two. Equality, hashing, ``repr`` and the guard against assignment are
    the dataclass's own.
    """
    cls = dataclass(frozen=True, slots=True)(cls)
    params, lines, namespace = [], [], {}
    for f in fields(cls):  # type: ignore[arg-type]
        namespace[f"_set_{f.name}"] = getattr(cls, f.name).__set__
        if f.default is not MISSING:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        else:
            params.append(f.name)
        lines.append(f"    _set_{f.name}(self, {f.name})\n")
    exec(f"def __init__(self, {', '.join(params)}):\n{''.join(lines)}", namespace)  # as dataclasses does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


class ReadOnlyDict(dict[K, V]):
    """A dict that refuses every change: a view's mappings (a plain ``dict`` to JSON, pydantic,
    pickle and ``copy``, which a ``MappingProxyType`` is not)."""

    __slots__ = ()

    def _refuse(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise TypeError("a view is an immutable value: its mappings cannot change")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))


EMPTY: ReadOnlyDict[Any, Any] = ReadOnlyDict()  # the shared empty mapping


@value
class JobView:
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


@value
class BlockView:
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
    job_id: str | None = None  # only for the seat's own blocks
    reserved_for: str | None = None
    coalition_id: str | None = None
    no_resale: bool = False
    must_allocate: bool = False
    marginal_value: float | None = None  # to this seat: Φ with the block − Φ without it
    best_job: str | None = None  # the seat's job this block serves in its best plan (if it held it)


@value
class OfferView:
    offer_id: str
    sender: str
    target: str
    direction: str  # incoming | outgoing
    block_ids: tuple[str, ...]
    requested_block_ids: tuple[str, ...]
    payment: float
    requested_payment: float
    created_round: int
    expires_round: int
    conditions: Mapping[str, bool]
    message: str
    status: str
    parent_offer_id: str | None
    value_to_me: float  # change of this seat's Φ if the offer settled now


@value
class CoalitionView:
    coalition_id: str
    proposer: str
    members: tuple[str, ...]
    job_id: str
    gpu_hours_required: int
    deadline_round: int
    commitments: Mapping[str, tuple[str, ...]]
    payment: float
    shares: Mapping[str, float]
    expires_round: int
    consented: tuple[str, ...]
    status: str
    pooled_hours: int
    breaches: tuple[str, ...]
    excused: tuple[str, ...]  # members whose committed blocks a shock destroyed (not a breach)
    created_round: int = 0


@value
class LabView:
    lab_id: str
    budget: float
    reputation: float
    n_blocks: int
    finished: bool


@value
class MessageView:
    round_index: int
    sender: str
    target: str | None
    text: str


@value
class EventView:
    round_index: int
    kind: str
    text: str


@value
class PitchView:
    lab_id: str
    bid: float
    job_id: str | None
    message: str
    round_index: int
    counter_to: str | None
    score: float | None = None  # the judge's score (judge mode, after the award)
    reasons: tuple[str, ...] = ()


@value
class AuctionView:
    auction_id: str
    block_id: str
    opened_round: int
    close_round: int
    status: str
    pitches: tuple[PitchView, ...]
    winner: str | None
    price: float


@value
class PooledJobView:
    """A public call for pooled capacity: hours and timing are public, the value is not."""

    job_id: str
    owner: str
    gpu_hours_required: int
    deadline_round: int
    min_reliability: float
    status: str


@value
class MarketView:
    blocks: tuple[BlockView, ...]
    auctions: tuple[AuctionView, ...]
    pooled_jobs: tuple[PooledJobView, ...]
    events: tuple[EventView, ...]


@value
class ResultView:
    ok: bool
    code: str
    message: str


@value
class SeatView:
    """One seat's observation; field names match ``gpu_arena.models.ArenaObservation``."""

    task: str
    split: str
    round_index: int
    max_rounds: int
    controlled_lab_id: str
    controlled_lab_budget: float
    controlled_lab_reputation: float
    private_jobs: tuple[JobView, ...]
    owned_blocks: tuple[BlockView, ...]
    public_market: MarketView
    visible_labs: tuple[LabView, ...]
    active_offers: tuple[OfferView, ...]
    active_coalitions: tuple[CoalitionView, ...]
    message_history: tuple[MessageView, ...]
    last_action_result: ResultView
    batna: float  # utility this lab reaches if it trades no more (Φ − initial budget)
    surplus_over_batna: float  # Φ now − Φ at reset
    best_plan: Mapping[str, tuple[str, ...]]  # own job -> own blocks, the optimal allocation of what it holds
    reward_scale: float  # rewards are Φ changes divided by this (own values and public facts only)
    reward: float = 0.0
    reward_breakdown: Mapping[str, float] = EMPTY
    done: bool = False


def render_text(view: SeatView) -> str:
    """A compact, complete plain-text rendering of a view (for people and as a prompt base)."""
    lines = [
        f"[{view.task}/{view.split}] round {view.round_index}/{view.max_rounds} - you are {view.controlled_lab_id}"
        f" - budget {view.controlled_lab_budget:.2f} - reputation {view.controlled_lab_reputation:.2f}",
        f"no-trade utility (BATNA) {view.batna:.2f}; surplus so far {view.surplus_over_batna:+.2f}",
        "Your jobs:",
    ]
    for j in view.private_jobs:
        lines.append(f"  {j.job_id}: {j.gpu_hours_required} GPU-h by round {j.deadline_round}, value {j.value:.2f},"
                     f" min reliability {j.min_reliability}, partial credit {j.partial_credit},"
                     f" assigned {j.assigned_hours} h, {j.status}" + (" [pooled]" if j.pooled else ""))
    lines.append("Your blocks:")
    for b in view.owned_blocks:
        mv = f", worth {b.marginal_value:.2f} to you" if b.marginal_value is not None else ""
        lines.append(f"  {b.block_id}: {b.gpu_count} GPUs rounds [{b.start_round},{b.end_round}) rel {b.reliability}"
                     f" energy {b.energy_cost}/GPU-h, {b.status}" + (f" -> {b.job_id}" if b.job_id else "") + mv)
    if view.best_plan:
        lines.append("Best allocation of what you hold: " + "; ".join(
            f"{j} <- {', '.join(bs)}" for j, bs in view.best_plan.items()))
    lines.append("Market blocks:")
    for b in view.public_market.blocks:
        mv = f", worth {b.marginal_value:.2f} to you" if b.marginal_value is not None else ""
        lines.append(f"  {b.block_id} ({b.owner}): {b.gpu_count} GPUs rounds [{b.start_round},{b.end_round})"
                     f" rel {b.reliability} energy {b.energy_cost}, {b.status}{mv}")
    for p in view.public_market.pooled_jobs:
        lines.append(f"Pooled call: {p.owner} needs {p.gpu_hours_required} GPU-h by round {p.deadline_round} ({p.job_id})")
    for a in view.public_market.auctions:
        bids = ", ".join(f"{p.lab_id} {p.bid:.2f}" for p in a.pitches) or "no pitches"
        lines.append(f"Auction {a.auction_id} for {a.block_id}, closes round {a.close_round}, {a.status}: {bids}")
    lines.append("Labs: " + "; ".join(f"{x.lab_id} budget {x.budget:.2f} rep {x.reputation:.2f}"
                                     + (" (finished)" if x.finished else "") for x in view.visible_labs))
    for o in view.active_offers:
        lines.append(f"Offer {o.offer_id} {o.direction} {o.sender}->{o.target}: gives {o.block_ids or '-'} for"
                     f" {o.requested_block_ids or '-'}, pays {o.payment:.2f}, asks {o.requested_payment:.2f},"
                     f" expires round {o.expires_round}, worth {o.value_to_me:+.2f} to you")
    for c in view.active_coalitions:
        lines.append(f"Coalition {c.coalition_id} ({c.status}) for {c.job_id}: members {', '.join(c.members)},"
                     f" consented {', '.join(c.consented)}")
    for e in view.public_market.events[-5:]:
        lines.append(f"Event r{e.round_index}: {e.text}")
    for m in view.message_history[-5:]:
        lines.append(f"Msg r{m.round_index} {m.sender}->{m.target or 'all'}: {m.text}")
    res = view.last_action_result
    lines.append(f"Last action: {'ok' if res.ok else 'ERROR ' + res.code} {res.message}".rstrip())
    return "\n".join(lines)
