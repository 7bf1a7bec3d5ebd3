"""What one seat may see (PettingZoo's per-agent view), as fresh copies, plus a text rendering.

A view holds the seat's own private jobs and blocks, the public market (other labs' blocks with
public attributes, pooled-job calls without values, auctions, announcements), offers and
coalitions that involve the seat, messages addressed to it or broadcast, and its own decision
aids priced by the grader's valuation. Another lab's job values never enter a view.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .types import BlockStatus, World
from .valuation import LabValuer, Plan, member_share_value, valid_hours

MESSAGE_HISTORY = 20
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


def _block_view(b, *, own: bool, round_index: int, marginal: float | None,  # type: ignore[no-untyped-def]
                best_job: str | None = None) -> BlockView:
    return BlockView(
        block_id=b.block_id, owner=b.owner, gpu_count=b.gpu_count, start_round=b.start_round,
        duration=b.duration, end_round=b.end_round, gpu_hours=b.hours, reliability=b.reliability,
        energy_cost=b.energy_cost, status=b.status,
        tradeable=b.status == BlockStatus.FREE and b.start_round > round_index,
        job_id=b.job_id if own else None, reserved_for=b.reserved_for if own else None,
        coalition_id=b.coalition_id, no_resale=b.no_resale, must_allocate=b.must_allocate if own else False,
        marginal_value=marginal, best_job=best_job)


def observe(world: World, lab_id: str, *, last_result: ResultView | None = None, reward: float = 0.0,
            reward_breakdown: dict[str, float] | None = None, aids: bool = True,
            valuer: LabValuer | None = None) -> SeatView:
    """Build ``lab_id``'s view. ``aids=False`` skips the what-if pricing (marginal values, offer values).

    ``valuer`` may pass a :class:`LabValuer` already built for this lab on this exact world state.
    """
    lab = world.labs[lab_id]
    r = world.round_index
    if valuer is None:
        valuer = LabValuer(world, lab_id)
    plan: Plan = valuer.plan()
    base_net = plan.net
    own_plannable = {b.block_id for b in valuer.blocks}

    jobs = []
    for j in world.jobs.values():
        if j.owner != lab_id:
            continue
        share = world.coalitions[j.coalition_id].shares.get(lab_id, 0.0) if j.coalition_id else 1.0
        jobs.append(JobView(j.job_id, j.gpu_hours_required, j.deadline_round, j.value, j.min_reliability,
                            j.partial_credit, j.pooled, j.status, valid_hours(world, j), j.realized_value,
                            j.coalition_id, share))
    owned: list[BlockView] = []
    market: list[BlockView] = []
    for b in world.blocks.values():
        if b.owner == lab_id:
            mv = None
            if aids and b.block_id in own_plannable:
                mv = base_net - valuer.net(without=(b.block_id,))
            owned.append(_block_view(b, own=True, round_index=r, marginal=mv,
                                     best_job=plan.assignment.get(b.block_id)))
        elif b.status not in (BlockStatus.DONE, BlockStatus.IDLE, BlockStatus.FAILED) or b.start_round > r:
            mv = None
            serves = None
            if aids and b.start_round > r and b.status in (BlockStatus.FREE, BlockStatus.RESERVED, BlockStatus.AUCTION):
                mv = valuer.net(extra=(b,)) - base_net
                if mv > 1e-9:
                    serves = valuer.job_for(b)
            market.append(_block_view(b, own=False, round_index=r, marginal=mv, best_job=serves))

    offers: list[OfferView] = []
    for o in world.offers.values():
        if o.status != "open" or lab_id not in (o.sender, o.target):
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
        if lab_id not in c.members and c.status != "formed":
            continue
        job = world.jobs[c.job_id]
        member = lab_id in c.members
        coalitions.append(CoalitionView(
            c.coalition_id, c.proposer, list(c.members), c.job_id, job.gpu_hours_required, job.deadline_round,
            {k: list(v) for k, v in c.commitments.items()} if member else {},
            c.payment if member else 0.0, dict(c.shares) if member else {}, c.expires_round,
            sorted(c.consented), c.status, valid_hours(world, job) if c.status == "formed" else 0,
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
                for a in world.auctions.values() if a.status == "open" or a.close_round >= r - 1]
    pooled = [PooledJobView(j.job_id, j.owner, j.gpu_hours_required, j.deadline_round, j.min_reliability, j.status)
              for j in world.jobs.values() if j.pooled and j.owner != lab_id]
    events = [EventView(e.round_index, e.kind, e.text) for e in world.events[-EVENT_HISTORY:]]
    msgs = [MessageView(m.round_index, m.sender, m.target, m.text) for m in world.messages
            if m.target is None or m.target == lab_id or m.sender == lab_id][-MESSAGE_HISTORY:]
    counts: dict[str, int] = {}
    for b in world.blocks.values():
        if b.owner is not None and b.status not in (BlockStatus.FAILED, BlockStatus.IDLE, BlockStatus.DONE):
            counts[b.owner] = counts.get(b.owner, 0) + 1
    labs = [LabView(x.lab_id, round(x.budget, 6), x.reputation, counts.get(x.lab_id, 0), x.finished)
            for x in world.labs.values()]
    phi = lab.budget + lab.realized_value + base_net + member_share_value(world, lab_id)
    best_plan: dict[str, list[str]] = {}
    for bid, jid in plan.assignment.items():
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
