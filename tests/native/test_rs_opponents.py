"""The Rust port of the world's default opponents (``gpu_arena.policies.negotiator`` and the five
archetypes of ``gpu_arena.policies.archetypes``, and the seat's own planner of
``gpu_arena.policies.planning``) against the Python originals.

Each Rust policy lives across a whole episode next to the Python one of the same seat, both built
as ``make_seat_policy`` builds it (the seat's archetype, seed and world parameters), and both see
every state: the Rust one on the view the Rust ``observe`` builds of the world, the Python one on
the view ``policy_move`` gives it. Every move must be the same action field by field (exact
floats, ints, tuples, message text), and the state each keeps (grudges, bids asked, refusers, its
random stream) must stay the same. Hypothesis then feeds both the same real views with odd
numbers in them (zeros of both signs, ties, huge and infinite values, breaches) and odd parameters,
and asks both planners the same what-ifs of real views.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from dataclasses import asdict
from functools import cache
from types import ModuleType
from typing import Any

import pytest
from helpers_rs import MIXES, canon, episode_worlds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_arena.core.engine import Episode
from gpu_arena.core.policy import policy_move
from gpu_arena.core.types import Action, RejectedAction
from gpu_arena.core.views import EventView, ReadOnlyDict
from gpu_arena.core.worldgen import ARCHETYPES as ARCHETYPE_NAMES
from gpu_arena.core.worldgen import world_seed
from gpu_arena.policies import make_seat_policy
from gpu_arena.policies.archetypes import ARCHETYPES
from gpu_arena.policies.negotiator import Negotiator
from gpu_arena.policies.planning import OwnPlanner

TASKS = ("single_trade", "market_round", "coalition_market")
# (split, task, seed, mix): every task over a few seeds and every mix, a few holdout worlds (other
# parameter ranges), and worlds where the rarest moves happen (a counter-pitch, a walk-out)
CASES = tuple([("train", t, s, m) for t in TASKS for s in range(6) for m in range(len(MIXES))]
              + [("holdout", t, s, m) for t in TASKS for s in range(2) for m in range(len(MIXES))]
              + [("train", "coalition_market", 16, 1), ("train", "coalition_market", 22, 0),
                 ("holdout", "coalition_market", 11, 2)])
# what the archetypes do between them over CASES (counter_pitch and release_capacity are rare)
ACTIONS = {"allocate_to_job", "accept_offer", "reject_offer", "counter_offer", "commit_to_coalition",
           "make_pitch", "counter_pitch", "form_coalition", "send_offer", "send_message", "release_capacity", "wait"}


def move_canon(move: Any) -> Any:
    if isinstance(move, RejectedAction):
        return ("rejected", move.code, move.message)
    assert type(move) is Action
    return canon(asdict(move))


def py_state(policy: Negotiator) -> dict[str, Any]:
    """The Python policy's parameters and kept state, in the shape of the Rust ``state()``."""
    names = ("acceptance_margin", "deadline_sensitivity", "honesty", "coalition_trust", "retaliation_memory", "risk",
             "min_pool_gain")
    return {**{k: canon(float(getattr(policy, k))) for k in names},
            "grudges": dict(sorted(policy.grudges.items())), "asked": dict(sorted(policy.asked.items())),
            "refusers": sorted(policy.refusers), "rng": policy.rng.getstate()}


def rs_state(policy: Any) -> dict[str, Any]:
    state = policy.state()
    return {k: canon(v) if isinstance(v, float) else v for k, v in state.items()}


def rust_seat(rs: ModuleType, world: Any, lab_id: str) -> Any:
    """The Rust policy ``make_seat_policy(world, lab_id)`` stands for."""
    lab = world.labs[lab_id]
    return rs.Negotiator(lab.archetype, world_seed(f"policy:{lab_id}", world.split, world.seed), dict(lab.params))


@cache
def _play(rs: ModuleType, case: tuple[str, str, int, int]) -> tuple[list[Any], Counter[tuple[str, str]]]:
    """One episode of ``case`` played by the Python seat policies, each archetype seat shadowed by
    its Rust policy: the moves (and states) where the two differ, and the (archetype, action type)
    counts of the archetypes' moves."""
    split, task, seed, mix = case
    episode = Episode.new(task, split, seed, controlled=())
    world = episode.world
    names = MIXES[mix]
    policies = {lid: make_seat_policy(world, lid, names[i % len(names)]) for i, lid in enumerate(world.labs)}
    shadows = {lid: rust_seat(rs, world, lid) for lid, p in policies.items()
               if type(p) is ARCHETYPES.get(world.labs[lid].archetype)}
    diffs: list[Any] = []
    counts: Counter[tuple[str, str]] = Counter()
    while not episode.done:
        moves = {}
        for lid, policy in policies.items():
            moves[lid] = policy_move(policy, episode, lid)
            shadow = shadows.get(lid)
            if shadow is None:
                continue
            got, want = shadow.act(world, lid), moves[lid]
            where = (case, world.round_index, lid, shadow.name)
            counts[(shadow.name, getattr(want, "action_type", "rejected"))] += 1
            if move_canon(got) != move_canon(want):
                diffs.append((where, "move", want, got))
            if rs_state(shadow) != py_state(policy):
                diffs.append((where, "state", py_state(policy), rs_state(shadow)))
        episode.step(moves)
    return diffs, counts


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_archetypes_move_as_python_over_episodes(rs: ModuleType, case: tuple[str, str, int, int]) -> None:
    diffs, counts = _play(rs, case)
    assert sum(counts.values()) > 0
    assert not diffs, diffs[:3]


def test_every_archetype_and_move_is_played(rs: ModuleType) -> None:
    counts: Counter[tuple[str, str]] = Counter()
    for case in CASES:
        counts.update(_play(rs, case)[1])
    assert {name for name, _ in counts} == set(ARCHETYPE_NAMES)
    assert {kind for _, kind in counts} == ACTIONS
    for name in ARCHETYPE_NAMES:  # each archetype does more than wait and allocate
        assert len({kind for n, kind in counts if n == name}) >= 6, name


def test_rust_knows_the_archetypes(rs: ModuleType) -> None:
    assert tuple(rs.archetype_names()) == ARCHETYPE_NAMES
    with pytest.raises(ValueError):
        rs.Negotiator("oracle", 0, {})
    world = Episode.new("single_trade", "train", 0, controlled=()).world
    with pytest.raises(KeyError):
        rs.Negotiator("selfish", 0, {}).act(world, "lab_99")


# ------------------------------------------------------------------ odd views, odd parameters

@cache
def _seat_views() -> tuple[tuple[tuple[Any, ...], ...], ...]:
    """Every seat's eager view (with aids) of every state of a few episodes, per seat in order."""
    seats: dict[tuple[str, int, str], list[Any]] = {}
    for task in TASKS:
        for seed, mix in ((3, 0), (22, 0)):
            for episode, _moves in episode_worlds(task, seed, mix):
                if episode.done:
                    continue
                for lid in episode.world.labs:
                    seats.setdefault((task, seed, lid), []).append(episode.observe(lid, aids=True, lazy=False))
    return tuple(tuple(views) for views in seats.values())


ODD = (0.0, -0.0, 1.0, -1.0, 0.01, 0.95, 1.0 + 2**-52, 1 - 2**-53, 1e-9, -1e-9, 5e-324, 0.25, 1e15, -1e15,
       1.7e308, float("inf"), float("-inf"))
floats = st.one_of(st.sampled_from(ODD), st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False))
PARAMS = {"acceptance_margin": (0.0, 1.0), "deadline_sensitivity": (0.0, 5.0), "honesty": (0.0, 1.0),
          "coalition_trust": (0.0, 1.5), "retaliation_memory": (0.0, 10.0), "risk": (0.0, 2.0)}
params_st = st.fixed_dictionaries({}, optional={
    **{k: st.floats(lo, hi) | st.sampled_from((lo, hi)) for k, (lo, hi) in PARAMS.items()},
    "ignored": st.floats(-1.0, 1.0)})


def _odd(rnd: random.Random, pool: list[float], x: Any, p: float = 0.3) -> Any:
    """``x``, or (with probability ``p``) a number from ``pool``."""
    return rnd.choice(pool) if rnd.random() < p else x


def perturb(view: Any, rnd: random.Random, pool: list[float]) -> Any:
    """``view`` with some of the numbers the negotiator reads replaced by odd ones (and, at
    times, breaches announced, offers made counters, best jobs moved)."""
    rep = dataclasses.replace
    labs = [x.lab_id for x in view.visible_labs]
    jobs = [j.job_id for j in view.private_jobs]
    market = view.public_market

    def block(b: Any) -> Any:
        best = b.best_job if rnd.random() < 0.8 else rnd.choice([None, "", *jobs])
        return rep(b, marginal_value=_odd(rnd, pool, b.marginal_value), best_job=best,
                   tradeable=b.tradeable if rnd.random() < 0.9 else not b.tradeable)

    events = list(market.events)
    if rnd.random() < 0.3:
        culprit = rnd.choice([*labs, "", "nobody"])
        events.append(EventView(view.round_index - rnd.randint(0, 2), "breach", f"{culprit} released committed blocks"))
    offers = tuple(rep(o, value_to_me=_odd(rnd, pool, o.value_to_me), payment=_odd(rnd, pool, o.payment, 0.15),
                       requested_payment=_odd(rnd, pool, o.requested_payment, 0.15),
                       parent_offer_id=o.parent_offer_id if rnd.random() < 0.8 else rnd.choice([None, "o_1"]))
                   for o in view.active_offers)
    coalitions = tuple(rep(c, payment=_odd(rnd, pool, c.payment),
                           shares=ReadOnlyDict({k: _odd(rnd, pool, v) for k, v in c.shares.items()}))
                       for c in view.active_coalitions)
    auctions = tuple(rep(a, pitches=tuple(rep(p, bid=_odd(rnd, pool, p.bid)) for p in a.pitches))
                     for a in market.auctions)
    same = rnd.choice(pool) if rnd.random() < 0.1 else None  # every job worth the same: a zero stake
    return rep(view,
               controlled_lab_budget=_odd(rnd, pool, view.controlled_lab_budget, 0.15),
               private_jobs=tuple(rep(j, value=_odd(rnd, pool, j.value, 0.15) if same is None else same)
                                  for j in view.private_jobs),
               owned_blocks=tuple(block(b) for b in view.owned_blocks),
               public_market=rep(market, blocks=tuple(block(b) for b in market.blocks), auctions=auctions,
                                 events=tuple(events)),
               visible_labs=tuple(rep(x, budget=_odd(rnd, pool, x.budget, 0.15), reputation=_odd(rnd, pool, x.reputation))
                                  for x in view.visible_labs),
               active_offers=offers, active_coalitions=coalitions)


def py_move(policy: Negotiator, view: Any) -> Any:
    """``policy_move``'s answer for a view in hand: the action, or the policy's error as the
    ``RejectedAction`` that stands for it."""
    try:
        return policy.act(view)
    except Exception as e:  # the engine's own rule: a broken seat loses its move
        return RejectedAction("policy_error", f"{type(e).__name__}: {e}")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(("negotiator", *ARCHETYPE_NAMES)), seed=st.integers(-2**70, 2**70), params=params_st,
       which=st.integers(0, 10**6), pool=st.lists(floats, min_size=1, max_size=6), salt=st.integers(0, 2**32))
def test_odd_views_and_parameters(rs: ModuleType, name: str, seed: int, params: dict[str, float], which: int,
                                  pool: list[float], salt: int) -> None:
    seats = _seat_views()
    views = seats[which % len(seats)]
    factory = ARCHETYPES.get(name, Negotiator)
    policy = factory(seed, **params)
    shadow = rs.Negotiator(name, seed, params)
    assert rs_state(shadow) == py_state(policy)
    rnd = random.Random(salt)
    for view in views:
        odd = perturb(view, rnd, pool)
        want, got = py_move(policy, odd), shadow.act_view(odd)
        assert move_canon(got) == move_canon(want), (odd.round_index, want, got)
        assert rs_state(shadow) == py_state(policy)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, 10**6), at=st.integers(0, 10**6), pooled=st.booleans(), salt=st.integers(0, 2**32),
       money=st.sampled_from((0.0, -0.0, 1e-9, -5.0, 12.34, -1e6, 1e6)) | st.floats(-500.0, 500.0))
def test_own_planner_prices_as_python(rs: ModuleType, which: int, at: int, pooled: bool, salt: int,
                                      money: float) -> None:
    views = _seat_views()[which % len(_seat_views())]
    view = views[at % len(views)]
    rnd = random.Random(salt)
    market = [b for b in view.public_market.blocks if rnd.random() < 0.4]
    own = [b for b in view.owned_blocks if rnd.random() < 0.2]  # a block it holds, counted twice
    extra = market + own
    without = [b.block_id for b in view.owned_blocks if rnd.random() < 0.3] + ["b_nowhere"] * rnd.randint(0, 1)
    planner = OwnPlanner(view, pooled=pooled)
    want = (planner.plan(extra, without, money), planner.net(extra, without, money),
            planner.gain(extra, without, money))
    got = rs.own_planner(view, pooled, [b.block_id for b in extra], without, money)
    assert canon(got) == canon(want)
    for i, job in enumerate(view.private_jobs):
        for hours in (0, 1, job.gpu_hours_required // 2, job.gpu_hours_required, job.gpu_hours_required + 3):
            assert canon(rs.own_planner_pooled_value(view, i, hours)) == canon(OwnPlanner.pooled_value(job, hours))
