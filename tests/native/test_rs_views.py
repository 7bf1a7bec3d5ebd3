"""The Rust port of ``gpu_arena.core.observe`` against the Python original: every seat's view of
every state of real episodes, with and without the decision aids, compared field by field with
exact floats and the Python container types (tuples, ``ReadOnlyDict``s, view classes)."""

from __future__ import annotations

import copy
import dataclasses
from functools import cache
from itertools import pairwise
from types import ModuleType
from typing import Any

import pytest
from helpers_rs import MIXES, episode_worlds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_arena.core.observe import observe
from gpu_arena.core.types import (
    AuctionStatus,
    BlockStatus,
    CoalitionStatus,
    Event,
    JobStatus,
    Message,
    OfferStatus,
    Pitch,
    World,
)
from gpu_arena.core.views import ReadOnlyDict, ResultView, render_text

TASKS = ("single_trade", "market_round", "coalition_market")


def view_canon(value: Any) -> Any:
    """``value`` as plain data that tells apart what ``==`` would not: float bits (hex, so -0.0
    is not 0.0), int from bool from float, tuple from list, ``ReadOnlyDict`` from dict, and each
    view's class and field names."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, [(f.name, view_canon(getattr(value, f.name)))
                                       for f in dataclasses.fields(value)])
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, dict):
        return (type(value).__name__, [(view_canon(k), view_canon(v)) for k, v in value.items()])
    if isinstance(value, tuple | list):
        return (type(value).__name__, [view_canon(v) for v in value])
    raise TypeError(f"no canonical form for {type(value).__name__}")


def _compare(rs: ModuleType, world: Any, lab_id: str, aids: bool) -> None:
    want = observe(world, lab_id, aids=aids)
    got = rs.observe_view(world, lab_id, aids)
    assert type(got) is type(want)
    assert view_canon(got) == view_canon(want), (world.task, world.seed, world.round_index, lab_id, aids)
    assert got == want
    assert rs.render_view_text(world, lab_id, aids) == render_text(want)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("mix", range(len(MIXES)))
def test_every_seat_every_state(rs: ModuleType, task: str, mix: int) -> None:
    seen = 0
    for seed in (mix, 7 + mix):
        for episode, _moves in episode_worlds(task, seed, mix):
            for lab_id in episode.world.labs:
                for aids in (True, False):
                    _compare(rs, episode.world, lab_id, aids)
                    seen += 1
    assert seen > 20


@pytest.mark.parametrize("task", TASKS)
def test_cached_conversion_over_an_episode(rs: ModuleType, task: str) -> None:
    """Converting an episode's views through one cache gives every state's exact view, sharing
    the Python views of facts that did not change (as the Python ``ViewCache`` shares them)."""
    worlds = [copy.deepcopy(episode.world) for episode, _moves in episode_worlds(task, 11, 2)]
    lab_id = next(iter(worlds[0].labs))
    shared = 0
    for aids in (True, False):
        views = rs.observe_views(worlds, lab_id, aids, True)
        for world, got in zip(worlds, views, strict=True):
            assert view_canon(got) == view_canon(observe(world, lab_id, aids=aids))
        for before, after in pairwise(views):
            shared += sum(a is b for a, b in zip(before.private_jobs, after.private_jobs, strict=False))
        fresh = rs.observe_views(worlds, lab_id, aids, False)
        assert not any(a is b for a, b in zip(fresh[0].private_jobs, fresh[1].private_jobs, strict=False))
    assert shared > 0


def test_cache_tells_zero_from_negative_zero(rs: ModuleType) -> None:
    """A cached view is reused only for bit-equal floats: -0.0 and 0.0 print apart."""
    world = copy.deepcopy(next(episode_worlds("market_round", 3, 0))[0].world)
    lab_id = next(iter(world.labs))
    job = next(j for j in world.jobs.values() if j.owner == lab_id)
    other = copy.deepcopy(world)
    world.jobs[job.job_id].realized_value = 0.0
    other.jobs[job.job_id].realized_value = -0.0
    views = rs.observe_views([world, other], lab_id, False, True)
    assert [view_canon(v) for v in views] == [view_canon(observe(w, lab_id, aids=False)) for w in (world, other)]


def test_judge_mode_scores(rs: ModuleType) -> None:
    """In judge mode the seat sees its own pitch's score and reasons, and no one else's."""
    scored = 0
    for task in ("market_round", "coalition_market"):
        for episode, _moves in episode_worlds(task, 2, 1, judge_mode="rule"):
            for lab_id in episode.world.labs:
                _compare(rs, episode.world, lab_id, True)
                view = observe(episode.world, lab_id)
                scored += sum(p.score is not None for a in view.public_market.auctions for p in a.pitches)
    assert scored > 0


def _statuses(cls: type) -> list[str]:
    return [v for k, v in vars(cls).items() if k.isupper()]


@cache
def _states() -> tuple[World, ...]:
    """A few states of real episodes, taken before the seats moved (kept: the hypothesis test
    changes copies of them)."""
    out = []
    for task, seed, mix in (("coalition_market", 1, 1), ("market_round", 4, 2), ("coalition_market", 5, 0)):
        for i, (episode, _moves) in enumerate(episode_worlds(task, seed, mix)):
            if i % 3 == 1:
                out.append(copy.deepcopy(episode.world))
    return tuple(out)


def _perturb(world: World, data: st.DataObject) -> None:
    """Odd but well-formed changes to ``world``: statuses, owners, rounds, budgets, pitches with
    scores, long message and event histories, missing reward facts."""
    draw = data.draw
    labs = list(world.labs)
    r = world.round_index
    for _ in range(draw(st.integers(0, 10))):
        b = world.blocks[draw(st.sampled_from(list(world.blocks)))]
        b.status = draw(st.sampled_from(_statuses(BlockStatus)))
        b.start_round = max(0, draw(st.sampled_from([r - 1, r, r + 1, b.start_round])))  # around the priced edge
        b.owner = draw(st.sampled_from([*labs, None]))
        b.job_id = draw(st.sampled_from([*world.jobs, None]))
        b.reliability = draw(st.sampled_from([0.0, 0.5, 0.9, 1.0, b.reliability]))
    for _ in range(draw(st.integers(0, 3))):
        j = world.jobs[draw(st.sampled_from(list(world.jobs)))]
        j.status = draw(st.sampled_from(_statuses(JobStatus)))
        j.pooled = draw(st.booleans())
    for c in world.coalitions.values():
        if draw(st.booleans()):
            c.status = draw(st.sampled_from(_statuses(CoalitionStatus)))
            c.consented = set(draw(st.lists(st.sampled_from(c.members), unique=True)))
    for o in world.offers.values():
        if draw(st.booleans()):
            o.status = draw(st.sampled_from(_statuses(OfferStatus)))
            o.payment = draw(st.sampled_from([0.0, -0.0, 1e-12, 3.25, o.payment]))
    for a in world.auctions.values():
        a.status = draw(st.sampled_from(_statuses(AuctionStatus)))
        for lid in draw(st.lists(st.sampled_from(labs), unique=True, max_size=3)):
            a.pitches[lid] = Pitch(lid, draw(st.floats(0, 100)), draw(st.sampled_from([*world.jobs, None])), "pick me",
                                   world.round_index, None, draw(st.none() | st.floats(0, 1)),
                                   draw(st.lists(st.sampled_from(["urgent", "fair"]), max_size=2)))
    for lab in world.labs.values():
        if draw(st.booleans()):
            lab.budget = draw(st.sampled_from([0.0, -5.0, 1e-7, 123.4567894, 2.5e9, lab.budget + 0.1]))
            lab.reputation = draw(st.floats(0, 1))
            lab.finished = draw(st.booleans())
    for _ in range(draw(st.integers(0, 25))):
        world.messages.append(Message(world.round_index, draw(st.sampled_from(labs)),
                                      draw(st.sampled_from([*labs, None])), draw(st.text(max_size=8))))
    for _ in range(draw(st.integers(0, 14))):
        world.events.append(Event(world.round_index, "news", draw(st.text(max_size=8))))
    for lab_id in labs:
        if draw(st.booleans()):
            world.initial_potential.pop(lab_id, None)
        if draw(st.booleans()):
            world.reward_scale.pop(lab_id, None)
    world.done = draw(st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_odd_states(rs: ModuleType, data: st.DataObject) -> None:
    world = copy.deepcopy(data.draw(st.sampled_from(_states())))
    _perturb(world, data)
    lab_id = data.draw(st.sampled_from(list(world.labs)))
    aids = data.draw(st.booleans())
    result = data.draw(st.none() | st.tuples(st.booleans(), st.sampled_from(["ok", "bad_offer"]), st.text(max_size=6)))
    reward = data.draw(st.floats(-2, 2))
    breakdown = data.draw(st.none() | st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.floats(-1, 1)),
                                               max_size=3))
    want = observe(world, lab_id, aids=aids, last_result=ResultView(*result) if result else None, reward=reward,
                   reward_breakdown=dict(breakdown) if breakdown is not None else None)
    got = rs.observe_view_with(world, lab_id, aids, result, reward, breakdown)
    assert view_canon(got) == view_canon(want)
    assert rs.render_view_text(world, lab_id, aids).split("\nLast action:")[0] == render_text(want).split(
        "\nLast action:")[0]


def test_view_canon_tells_apart_what_eq_does_not() -> None:
    assert view_canon((0.0,)) != view_canon((-0.0,))
    assert view_canon((1,)) != view_canon((1.0,))
    assert view_canon((True,)) != view_canon((1,))
    assert view_canon((1,)) != view_canon([1])
    assert view_canon(ReadOnlyDict(a=1)) != view_canon({"a": 1})


def test_a_changed_world_changes_the_view(rs: ModuleType) -> None:
    """The comparison can fail: a Rust view of one state differs from Python's view of another."""
    states = []
    for episode, _moves in episode_worlds("coalition_market", 3, 1):
        states.append(episode)
        if episode.world.round_index >= 2:
            break
    world = states[-1].world
    lab_id = next(iter(world.labs))
    got = view_canon(rs.observe_view(world, lab_id, True))
    world.labs[lab_id].budget += 1.0
    assert got != view_canon(observe(world, lab_id, aids=True))
    assert view_canon(rs.observe_view(world, lab_id, True)) == view_canon(observe(world, lab_id, aids=True))


def test_unknown_lab_is_refused(rs: ModuleType) -> None:
    episode, _moves = next(episode_worlds("single_trade", 0, 0))
    with pytest.raises(KeyError):
        rs.observe_view(episode.world, "nobody", True)
