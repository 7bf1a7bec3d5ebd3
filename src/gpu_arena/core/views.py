"""What one seat may see (PettingZoo's per-agent view), as fresh copies, plus a text rendering.

A view holds the seat's own private jobs and blocks, the public market (other labs' blocks with
public attributes, pooled-job calls without values, auctions, announcements), offers and
coalitions that involve the seat, messages addressed to it or broadcast, and its own decision
aids priced by the grader's valuation. Another lab's job values never enter a view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .allocation import BlockKey
from .types import (
    ASSIGNED,
    PLANNABLE,
    AuctionStatus,
    Block,
    BlockStatus,
    CoalitionStatus,
    Job,
    JobStatus,
    OfferStatus,
    World,
)
from .valuation import LabValuer, Plan, member_share_value

MESSAGE_HISTORY = 20
# market blocks priced for the seat (marginal value, best job): those it could still come to hold
_PRICED = frozenset({BlockStatus.FREE, BlockStatus.RESERVED, BlockStatus.AUCTION})
EVENT_HISTORY = 12


@dataclass(slots=True)
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


@dataclass(slots=True)
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


@dataclass(slots=True)
class OfferView:
    offer_id: str
    sender: str
    target: str
    direction: str  # incoming | outgoing
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
    value_to_me: float  # change of this seat's Φ if the offer settled now


@dataclass(slots=True)
class CoalitionView:
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
    excused: list[str]  # members whose committed blocks a shock destroyed (not a breach)
    created_round: int = 0


@dataclass(slots=True)
class LabView:
    lab_id: str
    budget: float
    reputation: float
    n_blocks: int
    finished: bool


@dataclass(slots=True)
class MessageView:
    round_index: int
    sender: str
    target: str | None
    text: str


@dataclass(slots=True)
class EventView:
    round_index: int
    kind: str
    text: str


@dataclass(slots=True)
class PitchView:
    lab_id: str
    bid: float
    job_id: str | None
    message: str
    round_index: int
    counter_to: str | None
    score: float | None = None  # the judge's score (judge mode, after the award)
    reasons: list[str] = field(default_factory=list)


@dataclass(slots=True)
class AuctionView:
    auction_id: str
    block_id: str
    opened_round: int
    close_round: int
    status: str
    pitches: list[PitchView]
    winner: str | None
    price: float


@dataclass(slots=True)
class PooledJobView:
    """A public call for pooled capacity: hours and timing are public, the value is not."""

    job_id: str
    owner: str
    gpu_hours_required: int
    deadline_round: int
    min_reliability: float
    status: str


@dataclass(slots=True)
class MarketView:
    blocks: list[BlockView]
    auctions: list[AuctionView]
    pooled_jobs: list[PooledJobView]
    events: list[EventView]


@dataclass(slots=True)
class ResultView:
    ok: bool
    code: str
    message: str


@dataclass(slots=True)
class SeatView:
    """One seat's observation; field names match ``gpu_arena.models.ArenaObservation``."""

    task: str
    split: str
    round_index: int
    max_rounds: int
    controlled_lab_id: str
    controlled_lab_budget: float
    controlled_lab_reputation: float
    private_jobs: list[JobView]
    owned_blocks: list[BlockView]
    public_market: MarketView
    visible_labs: list[LabView]
    active_offers: list[OfferView]
    active_coalitions: list[CoalitionView]
    message_history: list[MessageView]
    last_action_result: ResultView
    batna: float  # utility this lab reaches if it trades no more (Φ − initial budget)
    surplus_over_batna: float  # Φ now − Φ at reset
    best_plan: dict[str, list[str]]  # own job -> own blocks, the optimal allocation of what it holds
    reward_scale: float  # rewards are Φ changes divided by this (own values and public facts only)
    reward: float = 0.0
    reward_breakdown: dict[str, float] = field(default_factory=dict)
    done: bool = False


# a BlockView's fields but the last two (marginal_value, best_job), which depend on the viewer
BlockRow = tuple[str, str | None, int, int, int, int, int, float, float, str, bool, str | None, str | None, str | None,
                 bool, bool]


class WorldIndex:
    """What every seat's view of one world state shares, gathered in one pass over the world.

    Blocks, jobs, labs, pooled calls, events and messages are kept as tuples of view fields;
    each view instantiates fresh view objects from them, so no two views (and nothing inside the
    world) share a mutable object. It also gathers each lab's valuation inputs (plannable blocks,
    open jobs, valid hours per job) so a :class:`LabValuer` needs no scan of its own. An index
    describes one state: build a new one after the world changes (``Episode`` keys it by
    ``World.version``).
    """

    __slots__ = ("events", "hours", "jobs", "labs", "market", "messages", "open_jobs", "owned", "plannable",
                 "pooled", "round_index", "world")

    def __init__(self, world: World) -> None:
        r = world.round_index
        self.world = world
        self.round_index = r
        jobs = world.jobs
        hours = dict.fromkeys(jobs, 0)
        counts: dict[str, int] = {}
        plannable: dict[str, list[Block]] = {}
        # the owner's rows, per owner: (block id, row); the others': (block, owner, row, valuation key if
        # it is priced for them, else None)
        owned: dict[str | None, list[tuple[str, BlockRow]]] = {}
        market: list[tuple[Block, str | None, BlockRow, BlockKey | None]] = []
        for b in world.blocks.values():
            status, owner, start, jid = b.status, b.owner, b.start_round, b.job_id
            gpu_hours, end = b.hours, b.end_round
            if jid is not None and status in ASSIGNED:
                job = jobs.get(jid)
                if job is not None and end <= job.deadline_round and b.reliability >= job.min_reliability:
                    hours[jid] += gpu_hours  # valid hours (see valuation.valid_hours)
            if owner is not None:
                if status not in _GONE:
                    counts[owner] = counts.get(owner, 0) + 1
                if status in PLANNABLE and start > r:
                    plannable.setdefault(owner, []).append(b)
            tradeable = status == BlockStatus.FREE and start > r
            common: tuple[str, str | None, int, int, int, int, int, float, float, str, bool] = (
                b.block_id, owner, b.gpu_count, start, b.duration, end, gpu_hours, b.reliability, b.energy_cost,
                status, tradeable)
            owned.setdefault(owner, []).append(
                (b.block_id, (*common, jid, b.reserved_for, b.coalition_id, b.no_resale, b.must_allocate)))
            if status not in _GONE or start > r:
                market.append((b, owner, (*common, None, None, b.coalition_id, b.no_resale, False),
                               (gpu_hours, end, b.reliability, b.energy_cost * gpu_hours)  # valuation.block_key(b)
                               if start > r and status in _PRICED else None))
        self.owned = owned
        self.market = market
        self.hours = hours
        self.plannable = plannable
        self.jobs: dict[str, list[tuple[Any, ...]]] = {}
        self.open_jobs: dict[str, list[Job]] = {}
        pooled: list[tuple[str, tuple[Any, ...]]] = []
        for j in jobs.values():
            share = world.coalitions[j.coalition_id].shares.get(j.owner, 0.0) if j.coalition_id else 1.0
            self.jobs.setdefault(j.owner, []).append((
                j.job_id, j.gpu_hours_required, j.deadline_round, j.value, j.min_reliability, j.partial_credit,
                j.pooled, j.status, hours[j.job_id], j.realized_value, j.coalition_id, share))
            if j.status == JobStatus.OPEN:
                self.open_jobs.setdefault(j.owner, []).append(j)
            if j.pooled:
                pooled.append((j.owner, (j.job_id, j.owner, j.gpu_hours_required, j.deadline_round,
                                         j.min_reliability, j.status)))
        self.pooled = pooled
        self.labs = [(x.lab_id, round(x.budget, 6), x.reputation, counts.get(x.lab_id, 0), x.finished)
                     for x in world.labs.values()]
        self.events = [(e.round_index, e.kind, e.text) for e in world.events[-EVENT_HISTORY:]]
        self.messages = [(m.sender, m.target, (m.round_index, m.sender, m.target, m.text)) for m in world.messages]

    def valuer(self, lab_id: str) -> LabValuer:
        """``LabValuer(world, lab_id)`` from the gathered inputs."""
        return LabValuer.from_parts(self.world, lab_id, self.open_jobs.get(lab_id, []),
                                    self.plannable.get(lab_id, []), self.hours)


_GONE = (BlockStatus.DONE, BlockStatus.IDLE, BlockStatus.FAILED)


def observe(world: World, lab_id: str, *, last_result: ResultView | None = None, reward: float = 0.0,
            reward_breakdown: dict[str, float] | None = None, aids: bool = True,
            valuer: LabValuer | None = None, index: WorldIndex | None = None) -> SeatView:
    """Build ``lab_id``'s view. ``aids=False`` skips the what-if pricing (marginal values, offer values).

    ``valuer`` and ``index`` may pass a :class:`LabValuer` and a :class:`WorldIndex` already built
    for this lab and world on this exact world state (the episode caches both per state).
    """
    lab = world.labs[lab_id]
    r = world.round_index
    if index is None:
        index = WorldIndex(world)
    if valuer is None:
        valuer = index.valuer(lab_id)
    plan: Plan = valuer.plan()
    base_net = plan.net
    assignment = plan.assignment

    jobs = [JobView(*row) for row in index.jobs.get(lab_id, ())]
    mine = index.owned.get(lab_id, ())
    if not aids:
        owned = [BlockView(*row, None, assignment.get(bid)) for bid, row in mine]
        market = [BlockView(*row, None, None) for _b, owner, row, _key in index.market if owner != lab_id]
    else:
        without = dict(zip([b.block_id for b in valuer.blocks], valuer.nets_without_each(), strict=True))
        owned = [BlockView(*row, base_net - without[bid] if bid in without else None, assignment.get(bid))
                 for bid, row in mine]
        candidates = [(b, key) for b, owner, _row, key in index.market if key is not None and owner != lab_id]
        prices = dict(zip([b.block_id for b, _key in candidates],
                          valuer.extra_prices([b for b, _key in candidates], [key for _b, key in candidates]),
                          strict=True))
        market = []
        for b, owner, row, _key in index.market:
            if owner == lab_id:
                continue
            mv = serves = None
            price = prices.get(b.block_id)
            if price is not None:
                mv = price[0] - base_net
                if mv > 1e-9:
                    serves = price[1]
            market.append(BlockView(*row, mv, serves))

    offers: list[OfferView] = []
    for o in world.offers.values():
        if o.status != OfferStatus.OPEN or lab_id not in (o.sender, o.target):
            continue
        incoming = o.target == lab_id
        gets, gives = (o.block_ids, o.requested_block_ids) if incoming else (o.requested_block_ids, o.block_ids)
        money = (o.payment - o.requested_payment) * (1 if incoming else -1)
        value = 0.0
        if aids:
            value = valuer.net(extra=[world.blocks[x] for x in gets], without=gives, money=money) - base_net + money
        offers.append(OfferView(o.offer_id, o.sender, o.target, "incoming" if incoming else "outgoing",
                                list(o.block_ids), list(o.requested_block_ids), o.payment, o.requested_payment,
                                o.created_round, o.expires_round, dict(o.conditions), o.message, o.status,
                                o.parent_offer_id, value))

    coalitions: list[CoalitionView] = []
    for c in world.coalitions.values():
        if lab_id not in c.members and c.status != CoalitionStatus.FORMED:
            continue
        job = world.jobs[c.job_id]
        member = lab_id in c.members
        coalitions.append(CoalitionView(
            c.coalition_id, c.proposer, list(c.members), c.job_id, job.gpu_hours_required, job.deadline_round,
            {k: list(v) for k, v in c.commitments.items()} if member else {},
            c.payment if member else 0.0, dict(c.shares) if member else {}, c.expires_round,
            sorted(c.consented), c.status, index.hours[job.job_id] if c.status == CoalitionStatus.FORMED else 0,
            list(c.breaches), list(c.excused), c.created_round))

    auctions = [AuctionView(a.auction_id, a.block_id, a.opened_round, a.close_round, a.status,
                            # the judge's score and reasons are checked against the pitcher's private
                            # job: a seat sees them for its own pitch only
                            [PitchView(p.lab_id, p.bid, p.job_id if p.lab_id == lab_id else None, p.message,
                                       p.round_index, p.counter_to,
                                       p.score if p.lab_id == lab_id else None,
                                       list(p.reasons) if p.lab_id == lab_id else [])
                             for p in a.pitches.values()],
                            a.winner, a.price)
                for a in world.auctions.values() if a.status == AuctionStatus.OPEN or a.close_round >= r - 1]
    pooled = [PooledJobView(*row) for owner, row in index.pooled if owner != lab_id]
    events = [EventView(*row) for row in index.events]
    msgs = [MessageView(*row) for sender, target, row in index.messages
            if target is None or target == lab_id or sender == lab_id][-MESSAGE_HISTORY:]
    labs = [LabView(*row) for row in index.labs]
    phi = lab.budget + lab.realized_value + base_net + member_share_value(world, lab_id, index.hours)
    best_plan: dict[str, list[str]] = {}
    for bid, jid in assignment.items():
        best_plan.setdefault(jid, []).append(bid)
    return SeatView(
        task=world.task, split=world.split, round_index=r, max_rounds=world.max_rounds,
        controlled_lab_id=lab_id, controlled_lab_budget=lab.budget, controlled_lab_reputation=lab.reputation,
        private_jobs=jobs, owned_blocks=owned,
        public_market=MarketView(market, auctions, pooled, events), visible_labs=labs,
        active_offers=offers, active_coalitions=coalitions, message_history=msgs,
        last_action_result=last_result or ResultView(True, "ok", ""),
        batna=phi - lab.initial_budget, surplus_over_batna=phi - world.initial_potential.get(lab_id, phi),
        best_plan=best_plan, reward_scale=world.reward_scale.get(lab_id, 1.0),
        reward=reward, reward_breakdown=dict(reward_breakdown or {}), done=world.done)


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
