"""The fast paths of valuation and views against the straightforward computations they replace.

Decision 0006: the allocation DP packs states into ints; a frontier's plans and what-if prices
are memoised per budget (a budget that binds no plan is stored as ∞); many extra blocks are
priced in one array pass; views read one shared per-state index. Each of these must give exactly
what the plain code gives, so the plain code is kept here as the reference: the tuple-state DP,
the per-state scans and the per-seat view scan.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.core import allocation as V
from gpu_arena.core.allocation import job_value
from gpu_arena.core.engine import Episode
from gpu_arena.core.observe import EVENT_HISTORY, MESSAGE_HISTORY, WorldIndex, observe
from gpu_arena.core.policy import RandomPolicy
from gpu_arena.core.types import ASSIGNED, TASKS, BlockStatus, World
from gpu_arena.core.valuation import LabValuer, member_share_value, valid_hours
from gpu_arena.core.views import (
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
    ResultView,
    SeatView,
)

BlockKey = tuple[int, int, float, float]
JobKey = tuple[int, int, int, float, float, float]


# ---------------------------------------------------------------- the straightforward computations


def ref_dp(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...]) -> tuple[dict, list]:
    caps = tuple(j[0] for j in jobs)
    frontier = {tuple(min(j[1], j[0]) for j in jobs): 0.0}
    parents = []
    for hours, end, rel, energy in blocks:
        options = [k for k, (req, _f, deadline, min_rel, value, _pc) in enumerate(jobs)
                   if end <= deadline and rel >= min_rel and value > 0 and req > 0]
        nxt = dict(frontier)
        par = {s: (s, -1) for s in frontier}
        for state, neg_e in frontier.items():
            for k in options:
                h = state[k]
                if h >= caps[k]:
                    continue
                ns = (*state[:k], min(h + hours, caps[k]), *state[k + 1:])
                ne = neg_e - energy
                if ns not in nxt or ne > nxt[ns] + 1e-12:
                    nxt[ns] = ne
                    par[ns] = (state, k)
        frontier = nxt
        parents.append(par)
    return frontier, parents


def ref_value(jobs: tuple[JobKey, ...], state: tuple[int, ...]) -> float:
    return sum(job_value(j[4], j[0], j[5], h) for j, h in zip(jobs, state, strict=True))


def ref_solve(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...],
              budget: float = float("inf")) -> tuple[float, float, tuple[int, ...]]:
    frontier, parents = ref_dp(blocks, jobs)
    best_state, best_total, best_value = None, float("-inf"), 0.0
    for state, neg_e in frontier.items():
        if -neg_e > budget + 1e-9:
            continue
        v = ref_value(jobs, state)
        if v + neg_e > best_total + 1e-12:
            best_total, best_state, best_value = v + neg_e, state, v
    choices = [-1] * len(blocks)
    state = best_state
    for i in range(len(blocks) - 1, -1, -1):
        prev, k = parents[i][state]
        choices[i] = k
        state = prev
    return best_value, best_value - best_total, tuple(choices)


def ref_with_extra(blocks: tuple[BlockKey, ...], jobs: tuple[JobKey, ...], extra: BlockKey,
                   budget: float) -> tuple[float, int]:
    hours, end, rel, energy = extra
    fits = [k for k, (req, _f, deadline, min_rel, value, _pc) in enumerate(jobs)
            if end <= deadline and rel >= min_rel and value > 0 and req > 0]
    best, choice = float("-inf"), -1
    frontier, _parents = ref_dp(blocks, jobs)
    for state, neg_e in frontier.items():
        if -neg_e > budget + 1e-9:
            continue
        vals = [job_value(j[4], j[0], j[5], h) for j, h in zip(jobs, state, strict=True)]
        base = sum(vals)
        if base + neg_e > best + 1e-12:
            best, choice = base + neg_e, -1
        if -neg_e + energy > budget + 1e-9:
            continue
        for k in fits:
            req = jobs[k][0]
            if state[k] >= req:
                continue
            gain = job_value(jobs[k][4], req, jobs[k][5], min(state[k] + hours, req)) - vals[k]
            if base + gain + neg_e - energy > best + 1e-12:
                best, choice = base + gain + neg_e - energy, k
    return best, choice


def ref_block_view(b: Any, *, own: bool, round_index: int, marginal: float | None,
                   best_job: str | None = None) -> BlockView:
    return BlockView(
        block_id=b.block_id, owner=b.owner, gpu_count=b.gpu_count, start_round=b.start_round,
        duration=b.duration, end_round=b.end_round, gpu_hours=b.hours, reliability=b.reliability,
        energy_cost=b.energy_cost, status=b.status,
        tradeable=b.status == BlockStatus.FREE and b.start_round > round_index,
        job_id=b.job_id if own else None, reserved_for=b.reserved_for if own else None,
        coalition_id=b.coalition_id, no_resale=b.no_resale, must_allocate=b.must_allocate if own else False,
        marginal_value=marginal, best_job=best_job)


def ref_observe(world: World, lab_id: str, *, last_result: ResultView | None = None, reward: float = 0.0,
                reward_breakdown: dict[str, float] | None = None, aids: bool = True) -> SeatView:
    """A seat's view as it was built before the shared index: one scan of the world per seat, one
    full plan per what-if price."""
    lab = world.labs[lab_id]
    r = world.round_index
    valuer = LabValuer(world, lab_id)
    plan = valuer.plan()
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
            owned.append(ref_block_view(b, own=True, round_index=r, marginal=mv,
                                        best_job=plan.assignment.get(b.block_id)))
        elif b.status not in (BlockStatus.DONE, BlockStatus.IDLE, BlockStatus.FAILED) or b.start_round > r:
            mv = None
            serves = None
            if aids and b.start_round > r and b.status in (BlockStatus.FREE, BlockStatus.RESERVED,
                                                           BlockStatus.AUCTION):
                mv = valuer.net(extra=(b,)) - base_net
                if mv > 1e-9:
                    serves = valuer.job_for(b)
            market.append(ref_block_view(b, own=False, round_index=r, marginal=mv, best_job=serves))
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
                                tuple(o.block_ids), tuple(o.requested_block_ids), o.payment, o.requested_payment,
                                o.created_round, o.expires_round, dict(o.conditions), o.message, o.status,
                                o.parent_offer_id, value))
    coalitions: list[CoalitionView] = []
    for c in world.coalitions.values():
        if lab_id not in c.members and c.status != "formed":
            continue
        job = world.jobs[c.job_id]
        member = lab_id in c.members
        coalitions.append(CoalitionView(
            c.coalition_id, c.proposer, tuple(c.members), c.job_id, job.gpu_hours_required, job.deadline_round,
            {k: tuple(v) for k, v in c.commitments.items()} if member else {},
            c.payment if member else 0.0, dict(c.shares) if member else {}, c.expires_round,
            tuple(sorted(c.consented)), c.status, valid_hours(world, job) if c.status == "formed" else 0,
            tuple(c.breaches), tuple(c.excused), c.created_round))
    auctions = [AuctionView(a.auction_id, a.block_id, a.opened_round, a.close_round, a.status,
                            tuple(PitchView(p.lab_id, p.bid, p.job_id if p.lab_id == lab_id else None, p.message,
                                            p.round_index, p.counter_to, p.score if p.lab_id == lab_id else None,
                                            tuple(p.reasons) if p.lab_id == lab_id else ())
                                  for p in a.pitches.values()),
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
        private_jobs=tuple(jobs), owned_blocks=tuple(owned),
        public_market=MarketView(tuple(market), tuple(auctions), tuple(pooled), tuple(events)),
        visible_labs=tuple(labs), active_offers=tuple(offers), active_coalitions=tuple(coalitions),
        message_history=tuple(msgs),
        last_action_result=last_result or ResultView(True, "ok", ""),
        batna=phi - lab.initial_budget, surplus_over_batna=phi - world.initial_potential.get(lab_id, phi),
        best_plan={j: tuple(bs) for j, bs in best_plan.items()}, reward_scale=world.reward_scale.get(lab_id, 1.0),
        reward=reward, reward_breakdown=dict(reward_breakdown or {}), done=world.done)


# ---------------------------------------------------------------- random DP inputs

block_keys = st.builds(
    lambda gpus, dur, end, rel, e: (gpus * dur, end, rel, round(e * gpus * dur, 4)),
    st.sampled_from([1, 2, 4, 8]), st.integers(1, 3), st.integers(2, 10),
    st.sampled_from([0.7, 0.85, 0.95, 0.99]), st.sampled_from([0.0, 0.05, 0.2, 0.33, 1.5]))
job_keys = st.builds(
    lambda req, fixed, deadline, min_rel, value, pc: (req, min(fixed, req + 4), deadline, min_rel, value, pc),
    st.sampled_from([0, 2, 4, 8, 12, 24]), st.sampled_from([0, 0, 2, 4, 8, 30]), st.integers(2, 10),
    st.sampled_from([0.0, 0.8, 0.9]), st.sampled_from([0.0, 1.0, 13.37, 40.0, 95.5]),
    st.sampled_from([0.0, 0.3, 0.5]))
budgets = st.sampled_from([0.0, 0.5, 3.0, 7.25, 20.0, 1e9, float("inf")])


def fresh() -> None:
    """Empty the valuation cache so every memo below is filled from this test's inputs."""
    V._frontier.cache_clear()


@settings(max_examples=400)
@given(st.lists(block_keys, max_size=7).map(tuple), st.lists(job_keys, min_size=1, max_size=3).map(tuple),
       st.lists(budgets, min_size=1, max_size=4))
def test_packed_dp_and_memoised_solve_equal_the_plain_dp(blocks, jobs, budget_list):
    fresh()
    fr = V._frontier(blocks, jobs)
    frontier, _parents = ref_dp(blocks, jobs)
    # the same states, in the same order, with the same energies and values
    assert fr.states == tuple(frontier)
    assert fr.neg_e == tuple(frontier.values())
    assert fr.base == tuple(ref_value(jobs, s) for s in frontier)
    for budget in budget_list:
        assert V.solve(blocks, jobs, budget) == ref_solve(blocks, jobs, budget)
    # the per-job values, summed job by job (large frontiers) or state by state (small ones)
    assert fr.vals == tuple(tuple(job_value(j[4], j[0], j[5], h) for j, h in zip(jobs, s, strict=True))
                            for s in frontier)
    assert fr.base == tuple(map(sum, fr.vals))


@settings(max_examples=300)
@given(st.lists(block_keys, max_size=6).map(tuple), st.lists(job_keys, min_size=1, max_size=3).map(tuple),
       st.lists(block_keys, min_size=1, max_size=12), budgets)
def test_batched_what_if_prices_equal_the_scalar_scan(blocks, jobs, extras, budget):
    expected = [ref_with_extra(blocks, jobs, e, budget) for e in extras]
    fresh()
    fr = V._frontier(blocks, jobs)
    # the array pass on its own (whatever the batch size), the memoised batch, and one at a time
    assert V._price_extras(fr, list(extras), budget) == expected
    fresh()
    assert V.with_extras(blocks, jobs, extras, budget) == expected
    fresh()
    assert [V.with_extra(blocks, jobs, e, budget) for e in extras] == expected


@settings(max_examples=400)
@given(st.lists(block_keys, max_size=7).map(tuple), st.lists(job_keys, min_size=1, max_size=3).map(tuple),
       st.lists(block_keys, min_size=1, max_size=8))
def test_grouped_what_if_prices_equal_the_scalar_scan_or_step_aside(blocks, jobs, extras):
    # under a budget that binds no state, one candidate per (job, hours) group gives the scan's
    # answer, ties included, or None (a near-tie it cannot settle), never another answer
    fresh()
    fr = V._frontier(blocks, jobs)
    for extra in extras:
        got = V._grouped(fr, extra, float("inf"))
        assert got is None or got == ref_with_extra(blocks, jobs, extra, float("inf"))


def test_grouped_prices_settle_exact_ties_and_step_aside_from_near_ties():
    jobs = ((4, 0, 9, 0.0, 10.0, 0.0), (4, 0, 9, 0.0, 10.0, 0.0))
    fresh()
    # two equal jobs: completing either is worth the same, and the scan keeps the first job
    fr = V._frontier((), jobs)
    extra = (4, 3, 0.9, 1.0)
    assert V._grouped(fr, extra, float("inf")) == ref_with_extra((), jobs, extra, float("inf")) == (9.0, 0)
    # "use it" worth 6e-13 more than "leave it": the scan keeps "leave it", a maximum would not
    one = ((4, 0, 9, 0.0, 10.0, 0.0),)
    assert V._grouped(V._frontier((), one), (4, 3, 0.9, 10.0 - 6e-13), float("inf")) is None
    # a budget that binds is the scan's to price
    assert V._grouped(fr, extra, 5.0) is None


def test_near_ties_are_replayed_by_the_scalar_rule():
    # two candidates 0.6e-12 apart: the scalar rule keeps the first, a plain maximum the second
    row = [1.0, -float("inf"), 1.0 + 6e-13, 0.5]
    assert V._replay(row, 2) == (1.0, -1)
    jobs = ((4, 0, 9, 0.0, 10.0, 0.0),)
    blocks: tuple[BlockKey, ...] = ()
    # the extra block's energy makes "use it" worth 6e-13 more than "leave it": within the tie band
    extra = (4, 3, 0.9, 10.0 - 6e-13)
    fresh()
    assert V._price_extras(V._frontier(blocks, jobs), [extra], 1e9) == [ref_with_extra(blocks, jobs, extra, 1e9)]


# ---------------------------------------------------------------- lab valuers and views in played worlds


def played_states(task: str, seeds: range, invalid_rate: float = 0.1):
    """(episode, world) after every round of random play."""
    for seed in seeds:
        ep = Episode.new(task, "train", seed, controlled=())
        pols = {lid: RandomPolicy(seed * 11 + i, invalid_rate=invalid_rate) for i, lid in enumerate(ep.world.labs)}
        while not ep.done:
            yield ep, ep.world
            ep.step({lid: p.act(ep.observe(lid, aids=False)) for lid, p in pols.items()})
        yield ep, ep.world


@pytest.mark.parametrize("task", TASKS)
def test_view_index_and_valuer_aids_equal_the_straightforward_scan(task):
    rng = random.Random(task)
    for ep, world in played_states(task, range(6)):
        index = WorldIndex(world)
        assert index.hours == {jid: valid_hours(world, j) for jid, j in world.jobs.items()}
        r = world.round_index
        for lid in world.labs:
            plain, fast = LabValuer(world, lid), index.valuer(lid)
            assert (fast.block_keys, fast.job_keys, fast.blocks, fast.jobs, fast.budget) == \
                   (plain.block_keys, plain.job_keys, plain.blocks, plain.jobs, plain.budget)
            assert fast.plan() == plain.plan()
            # an own block's marginal value: one full plan without it (read off the base plan when the
            # plan leaves the block unused, which must give the very same float)
            assert [fast.net_without(i) for i in range(len(fast.blocks))] == \
                [plain.plan(without=(b.block_id,)).net for b in plain.blocks]
            # a market block's: the scalar what-if scan (and a full plan with it, to 1e-9)
            market = [b for b in world.blocks.values() if b.owner != lid and b.start_round > r
                      and b.status in (BlockStatus.FREE, BlockStatus.RESERVED, BlockStatus.AUCTION)]
            for b, (net, job) in zip(market, fast.extra_prices(market), strict=True):
                if not plain.jobs:
                    assert (net, job) == (0.0, None)
                    continue
                key = (b.hours, b.end_round, b.reliability, b.energy_cost * b.hours)
                ref_net, k = ref_with_extra(plain.block_keys, plain.job_keys, key, plain.budget)
                assert (net, job) == (ref_net, plain.jobs[k].job_id if k >= 0 else None)
                assert net == pytest.approx(plain.plan(extra=[b]).net, abs=1e-9)
            # the episode's cached view equals one built from scratch, and the per-seat scan's view
            aids = rng.random() < 0.5
            res = ep.last_results.get(lid)
            row = ep.last_rewards.get(lid, {})
            args: dict[str, Any] = dict(aids=aids, reward=row.get("normalized_reward", 0.0), reward_breakdown=row,
                                        last_result=ResultView(res.ok, res.code, res.message) if res else None)
            cached = repr(ep.observe(lid, aids=aids))
            assert cached == repr(observe(world, lid, **args)) == repr(ref_observe(world, lid, **args))


def test_views_are_shared_values_rebuilt_after_every_change():
    ep = Episode.new("coalition_market", "train", 3, controlled=())
    pols = {lid: RandomPolicy(i) for i, lid in enumerate(ep.world.labs)}
    seen: list[Any] = []
    late: list[tuple[Any, str]] = []  # lazy views read only after the world moved on
    while not ep.done:
        views = {lid: ep.observe(lid) for lid in ep.world.labs}
        # a seat's view of one state is built once and shared; the market's plain rows are shared
        # across seats of that state
        assert ep.observe("lab_0") is views["lab_0"]
        plain = {lid: ep.observe(lid, aids=False) for lid in ep.world.labs}
        shared = {b.block_id: b for b in plain["lab_0"].public_market.blocks}
        assert any(b is shared.get(b.block_id) for b in plain["lab_1"].public_market.blocks)
        # a lazy view prices each aid on first read, to the same numbers as the eager one
        lazy = ep.observe("lab_2", lazy=True)
        assert lazy == views["lab_2"] and repr(lazy) == repr(views["lab_2"])
        late.append((ep.observe("lab_1", lazy=True), repr(views["lab_1"])))
        seen.append(repr(ep.observe("lab_2")))
        ep.step({lid: p.act(views[lid]) for lid, p in pols.items()})
    assert len(set(seen)) == len(seen)  # every round's view is rebuilt, never a stale one
    assert all(repr(view) == expected for view, expected in late)  # priced on the state it was taken in


def test_a_lazy_view_prices_one_block_for_one_read_and_the_rest_on_the_next():
    ep = Episode.new("coalition_market", "train", 5, controlled=())
    pols = {lid: RandomPolicy(i) for i, lid in enumerate(ep.world.labs)}
    checked = 0
    while not ep.done:
        for lid in ep.world.labs:
            eager = ep.observe(lid)
            lazy = Episode.from_snapshot(ep.snapshot(), controlled=()).observe(lid, lazy=True)
            market = [b for b in lazy.public_market.blocks if hasattr(b, "_aids")]
            owned = [b for b in lazy.owned_blocks if hasattr(b, "_aids")]
            by_id = {b.block_id: b for b in (*eager.public_market.blocks, *eager.owned_blocks)}
            for blocks, priced in ((market, lambda a: a._market), (owned, lambda a: a._owned)):
                if len(blocks) < 2:
                    continue
                first = blocks[-1]
                assert first.marginal_value == by_id[first.block_id].marginal_value
                assert list(priced(first._aids)) == [first.block_id]  # that block alone
                second = blocks[0]
                assert second.marginal_value == by_id[second.block_id].marginal_value
                assert len(priced(second._aids)) == len(blocks)  # and then all the others together
                assert [b.marginal_value for b in blocks] == [by_id[b.block_id].marginal_value for b in blocks]
                checked += 1
        ep.step({lid: p.act(ep.observe(lid)) for lid, p in pols.items()})
    assert checked >= 10


def test_a_budget_that_binds_no_plan_shares_the_unbounded_memo():
    jobs = ((8, 0, 9, 0.0, 40.0, 0.5),)
    blocks = ((8, 3, 0.9, 2.0), (4, 4, 0.9, 1.0))
    fresh()
    fr = V._frontier(blocks, jobs)
    assert fr.max_energy == 2.0  # the frontier keeps the cheapest way to each state: 8 h for 2.0
    assert fr.budget_for(100.0) == float("inf") and fr.budget_for(1.5) == 1.5
    assert fr.budget_for(2.5, energy=1.0) == 2.5  # an extra block's energy counts against the budget
    assert fr.budget_for(3.5, energy=1.0) == float("inf")
    assert V.solve(blocks, jobs, 100.0) == V.solve(blocks, jobs, 50.0) == ref_solve(blocks, jobs, 100.0)
    assert set(fr.solved) == {float("inf")}
    assert V.solve(blocks, jobs, 1.5) == ref_solve(blocks, jobs, 1.5) != ref_solve(blocks, jobs, 100.0)
    assert set(fr.solved) == {float("inf"), 1.5}


def test_index_counts_only_assigned_fitting_hours():
    ep = Episode.new("market_round", "train", 5, controlled=())
    w = ep.world
    lab = next(iter(w.labs))
    job = next(j for j in w.jobs.values() if j.owner == lab)
    b = next(b for b in w.blocks.values() if b.owner == lab)
    b.job_id, b.status = job.job_id, BlockStatus.ALLOCATED
    b.reliability, job.min_reliability, job.deadline_round = 0.9, 0.8, b.end_round
    assert WorldIndex(w).hours[job.job_id] == b.hours == valid_hours(w, job)
    b.reliability = 0.7  # below the job's floor: it will not count
    assert WorldIndex(w).hours[job.job_id] == 0 == valid_hours(w, job)
    b.reliability, job.deadline_round = 0.9, b.end_round - 1  # ends after the deadline
    assert WorldIndex(w).hours[job.job_id] == 0 == valid_hours(w, job)
    job.deadline_round, b.status = b.end_round, BlockStatus.FREE  # not assigned
    assert WorldIndex(w).hours[job.job_id] == 0 == valid_hours(w, job)
    assert BlockStatus.ALLOCATED in ASSIGNED


def test_an_episode_keeps_its_own_frontiers_in_front_of_the_shared_cache():
    ep = Episode.new("coalition_market", "train", 2, controlled=())
    for lid in ep.world.labs:
        ep.observe(lid)
    cache = ep.valuer("lab_1")._frontiers
    assert cache is not None and ep.valuer("lab_2")._frontiers is cache
    assert ep.observe("lab_0").owned_blocks  # views price on the same cache (their index hands it on)
    # another episode, or anything else, may flush the shared cache: this episode still finds its own
    V._frontier.cache_clear()
    hits = cache.get.cache_info().hits
    fresh = LabValuer(ep.world, "lab_1", frontiers=cache)
    assert fresh.totals() == LabValuer(ep.world, "lab_1").totals()
    assert cache.get.cache_info().hits == hits + 1
    assert V._frontier.cache_info().currsize == 1  # only the valuer without a cache went to the shared one
    # the same frontier whichever cache answers
    plain = LabValuer(ep.world, "lab_1")
    assert V.frontier(plain.block_keys, plain.job_keys, V.FrontierCache()).codes == \
        V.frontier(plain.block_keys, plain.job_keys).codes
