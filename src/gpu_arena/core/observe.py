"""Building a seat's view of a world state: one shared index per state, decision aids priced lazily.

:class:`WorldIndex` gathers in one pass over the world what every seat's view of that state shares,
as immutable view objects (labs, events, messages, pooled calls, the market's blocks) that all
views of the state hold in common. :func:`observe` assembles one seat's :class:`SeatView` from it.

The decision aids (a block's marginal value and best job, an offer's value) cost a what-if plan
each. A view with aids carries a :class:`SeatAids` that prices each aid the first time it is read
and keeps it: a scripted opponent that never looks at an offer's value never pays for it. The
aids are priced on what was captured when the view was built (keys of blocks and jobs, the
budget), never on the live world, so a view read late still describes its own state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from operator import attrgetter
from typing import Any

from .allocation import BlockKey, FrontierCache
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
from .valuation import LabValuer, member_share_value
from .views import (
    EMPTY,
    AuctionView,
    BlockView,
    CoalitionView,
    EventView,
    JobView,
    LabView,
    MarketView,
    MessageView,
    OfferView,
    PitchView,
    PooledJobView,
    ReadOnlyDict,
    ResultView,
    SeatView,
)

MESSAGE_HISTORY = 20
EVENT_HISTORY = 12
# market blocks priced for the seat (marginal value, best job): those it could still come to hold
_PRICED = frozenset({BlockStatus.FREE, BlockStatus.RESERVED, BlockStatus.AUCTION})
_GONE = (BlockStatus.DONE, BlockStatus.IDLE, BlockStatus.FAILED)
_OK = ResultView(True, "ok", "")
_UNPRICED = (None, None)


class SeatAids:
    """One seat's decision aids in one state, each priced on first read and then kept.

    Holds the seat's :class:`LabValuer` (whose prices depend only on what it captured when it was
    built), ``priced`` (block id -> valuation key of each market block priced for the seat: those
    it could still come to hold) and, per offer, the inputs of its what-if plan. Reads are exact: the same numbers the
    eager computation gives (tests/core/test_fast_paths.py).

    The first market block read is priced alone, and so is the first own block: a policy that
    looks at the blocks of one offer or one auction pays for those. A second read of either kind
    prices all the others of that kind together, as a policy scanning the market does.
    """

    __slots__ = ("_market", "_market_all", "_offer_inputs", "_offers", "_owned", "_owned_all", "base_net", "priced",
                 "valuer")

    def __init__(self, valuer: LabValuer, base_net: float, market_keys: dict[str, BlockKey],
                 offer_inputs: dict[str, tuple[list[tuple[int, BlockKey]], tuple[str, ...], float]]) -> None:
        self.valuer = valuer
        self.base_net = base_net
        self.priced = market_keys  # block id -> key, for the market blocks priced for this seat
        self._market: dict[str, tuple[float | None, str | None]] = {}
        self._market_all = False
        self._owned: dict[str, float] = {}
        self._owned_all = False
        self._offer_inputs = offer_inputs  # offer id -> (blocks it gets, ids it gives, money it gets)
        self._offers: dict[str, float] = {}

    def _price_market(self, ids: list[str]) -> None:
        prices = self.valuer.prices_of([self.priced[bid] for bid in ids])
        for bid, (net, job) in zip(ids, prices, strict=True):
            mv = net - self.base_net
            self._market[bid] = (mv, job if mv > 1e-9 else None)

    def market_prices(self) -> dict[str, tuple[float | None, str | None]]:
        """(marginal value, best job) of every market block priced for the seat, those not read yet
        priced together (:meth:`LabValuer.prices_of`)."""
        if not self._market_all:
            self._price_market([bid for bid in self.priced if bid not in self._market])
            self._market_all = True
        return self._market

    def market(self, block_id: str) -> tuple[float | None, str | None]:
        """(marginal value, best job) of one market block ((None, None): not priced for the seat)."""
        hit = self._market.get(block_id)
        if hit is None:
            if block_id not in self.priced:
                return _UNPRICED
            if self._market:
                return self.market_prices()[block_id]
            self._price_market([block_id])
            hit = self._market[block_id]
        return hit

    def owned_values(self) -> dict[str, float]:
        """Marginal value of each of the seat's plannable blocks: Φ with it − Φ without it, those not
        read yet priced together (the base plan solved once)."""
        if not self._owned_all:
            for i, b in enumerate(self.valuer.blocks):
                if b.block_id not in self._owned:
                    self._owned[b.block_id] = self.base_net - self.valuer.net_without(i)
            self._owned_all = True
        return self._owned

    def owned(self, block_id: str) -> float | None:
        """Marginal value of one of the seat's blocks (None: not plannable)."""
        hit = self._owned.get(block_id)
        if hit is None and not self._owned_all:
            if self._owned:
                return self.owned_values().get(block_id)
            for i, b in enumerate(self.valuer.blocks):
                if b.block_id == block_id:
                    hit = self._owned[block_id] = self.base_net - self.valuer.net_without(i)
                    break
        return hit

    def offer(self, offer_id: str) -> float:
        """Change of the seat's Φ if the offer settled now."""
        if offer_id not in self._offers:
            gets, gives, money = self._offer_inputs[offer_id]
            self._offers[offer_id] = self.valuer.net_of(gets, gives, money) - self.base_net + money
        return self._offers[offer_id]


def _no_write(self: Any, value: Any) -> None:
    """Views are frozen: a proxy's fields have no setter that does anything."""
    raise AttributeError("a view is an immutable value")


class _Lazy:
    """A proxy view: the fields of a shared plain view (``_base``) plus aids read from a
    :class:`SeatAids`. It equals, prints, pickles and copies as the plain view with the aids filled
    in; it costs two references to build, where a frozen dataclass costs a write per field."""

    __slots__ = ()
    _plain_type: type

    def plain(self) -> Any:
        """The same view as its plain dataclass, every aid priced."""
        return self._plain_type(*(getattr(self, f.name) for f in fields(self._plain_type)))

    def __repr__(self) -> str:
        return repr(self.plain())

    def __eq__(self, other: object) -> bool:
        return bool(self.plain() == (other.plain() if isinstance(other, _Lazy) else other))

    def __hash__(self) -> int:
        return hash(self.plain())

    def __reduce__(self) -> tuple[Any, ...]:
        plain = self.plain()
        return (self._plain_type, tuple(getattr(plain, f.name) for f in fields(plain)))


def _proxy_type(base: type, aids: dict[str, Callable[[Any], Any]]) -> Any:
    """A subclass of the view dataclass ``base`` whose fields read the shared plain view, but for
    ``aids``: field name -> function of the proxy."""
    namespace: dict[str, Any] = {"__slots__": ("_aids", "_base"), "_plain_type": base}
    for f in fields(base):
        namespace[f.name] = property(aids.get(f.name) or attrgetter(f"_base.{f.name}"), _no_write)
    return type(f"Lazy{base.__name__}", (_Lazy, base), namespace)


_OwnedBlock = _proxy_type(BlockView, {"marginal_value": lambda v: v._aids.owned(v._base.block_id)})
_MarketBlock = _proxy_type(BlockView, {"marginal_value": lambda v: v._aids.market(v._base.block_id)[0],
                                       "best_job": lambda v: v._aids.market(v._base.block_id)[1]})
_Offer = _proxy_type(OfferView, {"value_to_me": lambda v: v._aids.offer(v._base.offer_id)})


def _maker(cls: Any) -> Callable[[SeatAids, Any], Any]:
    """The constructor of proxies of type ``cls``: (aids, plain view) -> proxy (its two slots
    written through their own setters, fetched once here rather than per proxy)."""
    new, set_base, set_aids = object.__new__, cls._base.__set__, cls._aids.__set__

    def make(aids: SeatAids, base: Any) -> Any:
        view = new(cls)
        set_base(view, base)
        set_aids(view, aids)
        return view
    return make


_owned_proxy, _market_proxy, _offer_proxy = _maker(_OwnedBlock), _maker(_MarketBlock), _maker(_Offer)


class ViewCache:
    """Views of world facts kept from one state to the next: a fact's view is built again only
    when its fields changed (a frozen view costs a write per field to build; comparing its
    fields with the last ones costs a fraction of that). One per episode; bounded by the facts
    of its world (one entry per block and seat, job, lab, message, ...)."""

    __slots__ = ("_market", "_own", "_views")

    def __init__(self) -> None:
        self._views: dict[Any, tuple[tuple[Any, ...], Any]] = {}
        # block id -> (row, best job, view) of its plain views: as the market shows it, as its owner sees it
        self._market: dict[str, tuple[tuple[Any, ...], BlockView]] = {}
        self._own: dict[str, tuple[tuple[Any, ...], str | None, BlockView]] = {}

    def market_block(self, row: tuple[Any, ...]) -> BlockView:
        """A market block's plain view (``row``: its first 16 fields; no aids), kept like :meth:`view`."""
        hit = self._market.get(row[0])
        if hit is not None and hit[0] == row:
            return hit[1]
        view = BlockView(*row, None, None)  # type: ignore[call-arg]
        self._market[row[0]] = (row, view)
        return view

    def own_block(self, row: tuple[Any, ...], best_job: str | None) -> BlockView:
        """An own block's plain view (no marginal value; ``best_job``: where its plan puts it), kept
        like :meth:`view`."""
        hit = self._own.get(row[0])
        if hit is not None and hit[1] == best_job and hit[0] == row:
            return hit[2]
        view = BlockView(*row, None, best_job)  # type: ignore[call-arg]
        self._own[row[0]] = (row, best_job, view)
        return view

    def view(self, key: Any, cls: Any, args: tuple[Any, ...]) -> Any:
        """``cls(*args)``, or the view built for ``key`` last time if its ``args`` were equal."""
        hit = self._views.get(key)
        if hit is not None and hit[0] == args:
            return hit[1]
        view = cls(*args)
        self._views[key] = (args, view)
        return view

    def priced(self, key: Any, row: tuple[Any, ...], marginal: float | None, best_job: str | None) -> BlockView:
        """A block's view with one seat's aids (``row``: its first 16 fields), kept like
        :meth:`view`. A zero marginal value is never matched (0.0 equals -0.0, which prints apart)."""
        if marginal == 0.0:
            return BlockView(*row, marginal, best_job)  # type: ignore[call-arg]
        return self.view(key, BlockView, (*row, marginal, best_job))


class WorldIndex:
    """What every seat's view of one world state shares, gathered in one pass over the world.

    Labs, events, messages, pooled calls and the market's blocks (without a viewer's aids) are
    immutable view objects that every view of this state shares; a block's fields are also kept
    as a tuple for views that attach their own aids. It also gathers each lab's valuation inputs
    (plannable blocks, open jobs, valid hours per job) so a :class:`LabValuer` needs no scan of its
    own. An index describes one state: build a new one after the world changes (``Episode`` keys
    it by ``World.version``).
    """

    __slots__ = ("_plain", "cache", "events", "frontiers", "hours", "jobs", "labs", "market", "messages", "open_jobs",
                 "owned", "plannable", "pooled", "round_index", "world")

    def __init__(self, world: World, cache: ViewCache | None = None, frontiers: FrontierCache | None = None) -> None:
        r = world.round_index
        self.world = world
        self.cache = cache = cache or ViewCache()
        self.frontiers = frontiers  # the valuers' frontier cache (an episode's), or None: the shared one
        self.round_index = r
        jobs = world.jobs
        hours = dict.fromkeys(jobs, 0)
        counts: dict[str, int] = {}
        plannable: dict[str, list[Block]] = {}
        # the owner's block fields, per owner; the others' market rows: (shared view, fields,
        # valuation key if the block is priced for a viewer, else None)
        owned: dict[str | None, list[tuple[Any, ...]]] = {}
        market: list[tuple[str | None, tuple[Any, ...], BlockKey | None]] = []
        free, gone, plannable_status, priced_status = BlockStatus.FREE, _GONE, PLANNABLE, _PRICED
        for b in world.blocks.values():
            status, owner, start, jid = b.status, b.owner, b.start_round, b.job_id
            duration = b.duration
            gpu_hours, end = b.gpu_count * duration, start + duration  # Block.hours, Block.end_round
            if jid is not None and status in ASSIGNED:
                job = jobs.get(jid)
                if job is not None and end <= job.deadline_round and b.reliability >= job.min_reliability:
                    hours[jid] += gpu_hours  # valid hours (see valuation.valid_hours)
            if owner is not None:
                if status not in gone:
                    counts[owner] = counts.get(owner, 0) + 1
                if status in plannable_status and start > r:
                    plannable.setdefault(owner, []).append(b)
            tradeable = status == free and start > r
            bid, gpus, rel, energy, coalition, no_resale = (b.block_id, b.gpu_count, b.reliability, b.energy_cost,
                                                            b.coalition_id, b.no_resale)
            owned.setdefault(owner, []).append((bid, owner, gpus, start, duration, end, gpu_hours, rel, energy, status,
                                                tradeable, jid, b.reserved_for, coalition, no_resale, b.must_allocate))
            if status not in gone or start > r:
                market.append((owner, (bid, owner, gpus, start, duration, end, gpu_hours, rel, energy, status,
                                       tradeable, None, None, coalition, no_resale, False),
                               (gpu_hours, end, rel, energy * gpu_hours)  # valuation.block_key(b)
                               if start > r and status in priced_status else None))
        self.owned = owned
        self.market = market
        self._plain: list[tuple[str | None, BlockView, BlockKey | None]] | None = None
        self.hours = hours
        self.plannable = plannable
        self.jobs: dict[str, list[tuple[Any, ...]]] = {}
        self.open_jobs: dict[str, list[Job]] = {}
        pooled: list[PooledJobView] = []
        for j in jobs.values():
            share = world.coalitions[j.coalition_id].shares.get(j.owner, 0.0) if j.coalition_id else 1.0
            self.jobs.setdefault(j.owner, []).append((
                j.job_id, j.gpu_hours_required, j.deadline_round, j.value, j.min_reliability, j.partial_credit,
                j.pooled, j.status, hours[j.job_id], j.realized_value, j.coalition_id, share))
            if j.status == JobStatus.OPEN:
                self.open_jobs.setdefault(j.owner, []).append(j)
            if j.pooled:
                pooled.append(cache.view(("pooled", j.job_id), PooledJobView, (
                    j.job_id, j.owner, j.gpu_hours_required, j.deadline_round, j.min_reliability, j.status)))
        self.pooled = pooled
        self.labs = tuple(cache.view(("lab", x.lab_id), LabView,
                                     (x.lab_id, round(x.budget, 6), x.reputation, counts.get(x.lab_id, 0), x.finished))
                          for x in world.labs.values())
        self.events = tuple(cache.view(event, EventView, event)
                            for event in [(e.round_index, e.kind, e.text) for e in world.events[-EVENT_HISTORY:]])
        self.messages = [(m.round_index, m.sender, m.target, m.text) for m in world.messages]

    def plain_rows(self) -> list[tuple[str | None, BlockView, BlockKey | None]]:
        """The market without aids, as (owner, view, valuation key or None) per block: one view per
        block, built on the first request and shared by every seat of this state."""
        if self._plain is None:
            view = self.cache.market_block
            self._plain = [(owner, view(row), key) for owner, row, key in self.market]
        return self._plain

    def plain_market(self, lab_id: str) -> tuple[BlockView, ...]:
        """The market as ``lab_id`` sees it without aids (see :meth:`plain_rows`)."""
        return tuple(view for owner, view, _key in self.plain_rows() if owner != lab_id)

    def valuer(self, lab_id: str) -> LabValuer:
        """``LabValuer(world, lab_id)`` from the gathered inputs."""
        return LabValuer.from_parts(self.world, lab_id, self.open_jobs.get(lab_id, []),
                                    self.plannable.get(lab_id, []), self.hours, self.frontiers)


def observe(world: World, lab_id: str, *, last_result: ResultView | None = None, reward: float = 0.0,
            reward_breakdown: Mapping[str, float] | None = None, aids: bool = True, lazy: bool = False,
            valuer: LabValuer | None = None, index: WorldIndex | None = None) -> SeatView:
    """Build ``lab_id``'s view. ``aids`` prices the what-if decision aids (marginal values, offer
    values); ``aids=False`` leaves them out (None / 0). ``lazy`` prices each aid when first read
    (for a policy that reads few of them), else all of them now (for the wire, which reads all).

    ``valuer`` and ``index`` may pass a :class:`LabValuer` and a :class:`WorldIndex` already built
    for this lab and world on this exact world state (the episode caches both per state).
    """
    lab = world.labs[lab_id]
    r = world.round_index
    if index is None:
        index = WorldIndex(world)
    if valuer is None:
        valuer = index.valuer(lab_id)
    value, energy, assignment = valuer.best()
    base_net = value - energy  # as Plan.net

    mine = index.owned.get(lab_id, ())
    offers = [o for o in world.offers.values() if o.status == OfferStatus.OPEN and lab_id in (o.sender, o.target)]
    if not aids:
        owned = tuple(index.cache.own_block(row, assignment.get(row[0]))
                      for row in mine)
        market = index.plain_market(lab_id)
    else:
        inputs: dict[str, tuple[list[tuple[int, BlockKey]], tuple[str, ...], float]] = {}
        for o in offers:
            incoming = o.target == lab_id
            gets, gives = (o.block_ids, o.requested_block_ids) if incoming else (o.requested_block_ids, o.block_ids)
            gets_keys = [(b.start_round, (b.hours, b.end_round, b.reliability, b.energy_cost * b.hours))
                         for b in (world.blocks[x] for x in gets)]
            inputs[o.offer_id] = (gets_keys, tuple(gives), (o.payment - o.requested_payment) * (1 if incoming else -1))
        if lazy:
            # only blocks the seat's aids price get a proxy: any other's aids are None in every
            # view, so its plain view is already the whole answer
            keys: dict[str, BlockKey] = {}
            seat = SeatAids(valuer, base_net, keys, inputs)
            own_block = index.cache.own_block
            plannable = {b.block_id for b in valuer.blocks}
            owned = tuple(_owned_proxy(seat, v) if v.block_id in plannable else v
                          for v in [own_block(row, assignment.get(row[0])) for row in mine])
            market_views = []
            for owner, v, key in index.plain_rows():
                if owner != lab_id:
                    if key is None:
                        market_views.append(v)
                    else:
                        keys[v.block_id] = key
                        market_views.append(_market_proxy(seat, v))
            market = tuple(market_views)
        else:
            seat = SeatAids(valuer, base_net, {row[0]: key for owner, row, key in index.market
                                               if key is not None and owner != lab_id}, inputs)
            prices, values = seat.market_prices(), seat.owned_values()  # every aid is read: price them all now
            cache = index.cache
            owned = tuple(cache.priced(("own", lab_id, row[0]), row, values.get(row[0]), assignment.get(row[0]))
                          for row in mine)
            market = tuple(cache.priced(("market", lab_id, row[0]), row, *prices.get(row[0], _UNPRICED))
                           for owner, row, _key in index.market if owner != lab_id)

    offer_views = []
    for o in offers:
        view = OfferView(o.offer_id, o.sender, o.target, "incoming" if o.target == lab_id else "outgoing",
                         tuple(o.block_ids), tuple(o.requested_block_ids), o.payment, o.requested_payment,
                         o.created_round, o.expires_round, ReadOnlyDict(o.conditions), o.message, o.status,
                         o.parent_offer_id, seat.offer(o.offer_id) if aids and not lazy else 0.0)
        offer_views.append(_offer_proxy(seat, view) if aids and lazy else view)

    coalitions: list[CoalitionView] = []
    for c in world.coalitions.values():
        if lab_id not in c.members and c.status != CoalitionStatus.FORMED:
            continue
        job = world.jobs[c.job_id]
        member = lab_id in c.members
        coalitions.append(CoalitionView(
            c.coalition_id, c.proposer, tuple(c.members), c.job_id, job.gpu_hours_required, job.deadline_round,
            ReadOnlyDict({k: tuple(v) for k, v in c.commitments.items()}) if member else EMPTY,
            c.payment if member else 0.0, ReadOnlyDict(c.shares) if member else EMPTY, c.expires_round,
            tuple(sorted(c.consented)), c.status,
            index.hours[job.job_id] if c.status == CoalitionStatus.FORMED else 0,
            tuple(c.breaches), tuple(c.excused), c.created_round))

    auctions = tuple(AuctionView(a.auction_id, a.block_id, a.opened_round, a.close_round, a.status,
                                 # the judge's score and reasons are checked against the pitcher's
                                 # private job: a seat sees them for its own pitch only
                                 tuple(PitchView(p.lab_id, p.bid, p.job_id if p.lab_id == lab_id else None,
                                                 p.message, p.round_index, p.counter_to,
                                                 p.score if p.lab_id == lab_id else None,
                                                 tuple(p.reasons) if p.lab_id == lab_id else ())
                                       for p in a.pitches.values()),
                                 a.winner, a.price)
                     for a in world.auctions.values() if a.status == AuctionStatus.OPEN or a.close_round >= r - 1)
    pooled = tuple(p for p in index.pooled if p.owner != lab_id)
    msgs = tuple(index.cache.view(m, MessageView, m) for m in [m for m in index.messages
                                                   if m[2] is None or m[2] == lab_id or m[1] == lab_id][-MESSAGE_HISTORY:])
    phi = lab.budget + lab.realized_value + base_net + member_share_value(world, lab_id, index.hours)
    best_plan: dict[str, list[str]] = {}
    for bid, jid in assignment.items():
        best_plan.setdefault(jid, []).append(bid)
    return SeatView(
        task=world.task, split=world.split, round_index=r, max_rounds=world.max_rounds,
        controlled_lab_id=lab_id, controlled_lab_budget=lab.budget, controlled_lab_reputation=lab.reputation,
        private_jobs=tuple(index.cache.view(("job", row[0]), JobView, row) for row in index.jobs.get(lab_id, ())),
        owned_blocks=owned,
        public_market=MarketView(market, auctions, pooled, index.events), visible_labs=index.labs,
        active_offers=tuple(offer_views), active_coalitions=tuple(coalitions), message_history=msgs,
        last_action_result=last_result or _OK,
        batna=phi - lab.initial_budget, surplus_over_batna=phi - world.initial_potential.get(lab_id, phi),
        best_plan=ReadOnlyDict({j: tuple(bs) for j, bs in best_plan.items()}),
        reward_scale=world.reward_scale.get(lab_id, 1.0),
        reward=reward, reward_breakdown=ReadOnlyDict(reward_breakdown or {}), done=world.done)
