"""The Rust allocation and valuation (``native/src/{allocation,valuation}.rs``) against
``gpu_arena.core.allocation`` and ``gpu_arena.core.valuation``, bit for bit: every lab of every
state of real episodes (each round's state and the state its seats' moves leave), and odd inputs
made by hypothesis."""

from __future__ import annotations

import contextlib
import copy
import functools
import math
from typing import Any

import pytest
from helpers_rs import canon, episode_worlds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_arena.core import allocation
from gpu_arena.core import valuation as V
from gpu_arena.core.rules import ActionError, apply_action
from gpu_arena.core.types import World

TASKS = ("single_trade", "market_round", "coalition_market")
# seeds 2 (mix 2) and 8 (mix 0) of coalition_market form coalitions on other labs' jobs
SEEDS = range(9)
MIXES = range(3)
CACHE_SIZES = (0, 1, 256)  # the results must not depend on the frontier cache


def _py_sweep(world: World, block_ids: list[str]) -> dict[str, Any]:
    """``valuation_sweep`` computed by the Python core."""
    out: dict[str, Any] = {}
    extra = [world.blocks[b] for b in block_ids]
    for lid in world.labs:
        v = V.LabValuer(world, lid)
        value, energy, assignment = v.best()
        out[lid] = {
            "inputs": (v.round_index, v.budget, [j.job_id for j in v.jobs], [b.block_id for b in v.blocks],
                       v.block_keys, v.job_keys),
            "totals": V.LabValuer(world, lid).totals(),
            "best": (value, energy, dict(assignment)),
            "potential_parts": V.potential_parts(world, lid),
            "potential": V.potential(world, lid, V.LabValuer(world, lid)),
            "member_share_value": V.member_share_value(world, lid),
            "net_without": [v.net_without(i) for i in range(len(v.blocks))],
            "extra_prices": v.extra_prices(extra),
            "job_for": [v.job_for(b) for b in extra],
            "net_extra": [v.net(extra=(b,)) for b in extra],
        }
    jobs = list(world.jobs.values())
    out["world"] = {
        "valid_hours": [V.valid_hours(world, j) for j in jobs],
        "owner_share": [V.owner_share(world, j) for j in jobs],
        "block_key": [V.block_key(b) for b in world.blocks.values()],
        "block_fits": [[V.block_fits(b, j) for j in jobs] for b in world.blocks.values()],
    }
    return out


def _check_state(rs: Any, world: World, cache_size: int) -> int:
    """Compare one state; return how many labs hold a non-zero coalition share there."""
    ids = list(world.blocks)
    got, want = rs.valuation_sweep(world, ids, cache_size), _py_sweep(world, ids)
    assert list(got) == list(want)
    for key in want:
        for field in want[key]:
            assert canon(got[key][field]) == canon(want[key][field]), (world.task, world.seed, world.round_index,
                                                                       key, field)
    return sum(1 for lid in world.labs if want[lid]["member_share_value"] != 0.0)


def _after_moves(world: World, moves: dict[str, Any]) -> World:
    """The state the seats' moves leave, applied in seat order by the Python rules (before the clock)."""
    w = copy.deepcopy(world)
    for lid, action in moves.items():
        with contextlib.suppress(ActionError):
            apply_action(w, lid, action)
    return w


@pytest.mark.parametrize("task", TASKS)
def test_every_lab_of_every_state(rs: Any, task: str) -> None:
    states = shared = 0
    for seed in SEEDS:
        for mix in MIXES:
            cache_size = CACHE_SIZES[(seed + mix) % len(CACHE_SIZES)]
            for episode, moves in episode_worlds(task, seed, mix):
                states += 1
                shared += _check_state(rs, episode.world, cache_size)
                if moves:
                    shared += _check_state(rs, _after_moves(episode.world, moves), cache_size)
    assert states > 100
    if task == "coalition_market":
        # states with formed coalitions on other labs' jobs, where member shares count
        assert shared > 0


@functools.cache
def _pool() -> tuple[World, ...]:
    """A few states of each task (copies), coalition states among them."""
    out = []
    for task, seed, mix in (("single_trade", 1, 0), ("market_round", 3, 1), ("coalition_market", 2, 2),
                            ("coalition_market", 8, 0), ("coalition_market", 4, 1)):
        for i, (episode, _moves) in enumerate(episode_worlds(task, seed, mix)):
            if i % 2 == 0:
                out.append(copy.deepcopy(episode.world))
    return tuple(out)


_money = st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.0, 5.5, -1e9, 1e9, math.inf]),
                   st.floats(-200.0, 200.0, allow_nan=False))
_budget = st.one_of(st.none(), st.sampled_from([0.0, -3.0, 1e-12, math.inf]), st.floats(-50.0, 500.0))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), money=_money, budget=_budget)
def test_plan_and_net_with_odd_inputs(rs: Any, data: Any, money: float, budget: float | None) -> None:
    pool = _pool()
    world = pool[data.draw(st.integers(0, len(pool) - 1))]
    lid = data.draw(st.sampled_from(list(world.labs)))
    ids = list(world.blocks)
    extra = data.draw(st.lists(st.sampled_from(ids), max_size=3))
    without = data.draw(st.lists(st.sampled_from([*ids, "no_such_block"]), max_size=3))
    if data.draw(st.booleans()):
        money = 0.0  # the no-money paths (the memoised best plan, the one-block price)
    extra_blocks = [world.blocks[b] for b in extra]
    plan = V.LabValuer(world, lid, budget).plan(extra_blocks, without, money)
    want = (plan.value, plan.energy, plan.assignment)
    assert canon(rs.valuation_plan(world, lid, extra, without, money, budget)) == canon(want)
    net = V.LabValuer(world, lid, budget).net(extra_blocks, without, money)
    assert canon(rs.valuation_net(world, lid, extra, without, money, budget)) == canon(net)
    if budget is None and not money:
        got = rs.valuation_best_allocation(world, lid, extra, without)
        plan = V.best_allocation(world, lid, extra_blocks, without)
        assert canon(got) == canon((plan.value, plan.energy, plan.assignment))


def test_single_functions(rs: Any) -> None:
    """The one-question entry points agree with the sweep's answers' Python originals."""
    for world in _pool()[::3]:
        for lid in world.labs:
            v = V.LabValuer(world, lid)
            assert canon(rs.valuation_totals(world, lid)) == canon(v.totals())
            assert canon(rs.valuation_potential_parts(world, lid)) == canon(V.potential_parts(world, lid))
            assert canon(rs.valuation_potential(world, lid)) == canon(V.potential(world, lid, V.LabValuer(world, lid)))
            assert canon(rs.valuation_member_share_value(world, lid)) == canon(V.member_share_value(world, lid))
            inputs = (v.round_index, v.budget, [j.job_id for j in v.jobs], [b.block_id for b in v.blocks],
                      v.block_keys, v.job_keys)
            assert canon(rs.valuation_valuer_inputs(world, lid, None)) == canon(inputs)
            for i in range(len(v.blocks)):
                assert canon(rs.valuation_net_without(world, lid, i)) == canon(v.net_without(i))
            ids = list(world.blocks)
            assert canon(rs.valuation_extra_prices(world, lid, ids)) == canon(v.extra_prices(
                [world.blocks[b] for b in ids]))
            for b in ids:
                assert rs.valuation_job_for(world, lid, b) == v.job_for(world.blocks[b])
        for j in world.jobs.values():
            assert canon(rs.valuation_valid_hours(world, j.job_id)) == canon(V.valid_hours(world, j))
            assert canon(rs.valuation_owner_share(world, j.job_id)) == canon(V.owner_share(world, j))
            for b in world.blocks.values():
                assert rs.valuation_block_fits(world, b.block_id, j.job_id) == V.block_fits(b, j)
        for b in world.blocks.values():
            assert canon(rs.valuation_block_key(world, b.block_id)) == canon(V.block_key(b))


# ------------------------------------------------------------------------------ allocation

_rel = st.sampled_from([0.0, 0.5, 0.8, 0.85, 0.9, 0.95, 1.0])
_block = st.tuples(st.integers(0, 12), st.integers(0, 8), _rel,
                   st.one_of(st.sampled_from([0.0, 1.0, 2.0, 4.0, 10.0]), st.floats(0.0, 60.0)))
_job = st.tuples(st.integers(0, 14), st.integers(0, 18), st.integers(0, 8), _rel,
                 st.one_of(st.sampled_from([0.0, -5.0, 10.0, 20.0, 1e6]), st.floats(-10.0, 120.0)),
                 st.sampled_from([0.0, -0.5, 0.25, 0.5, 1.0]))
_budgets = st.lists(st.one_of(st.sampled_from([0.0, -1.0, 3.0, 10.0, math.inf]), st.floats(-5.0, 150.0)),
                    min_size=1, max_size=4)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks=st.lists(_block, max_size=6), jobs=st.lists(_job, max_size=3), budgets=_budgets,
       extras=st.lists(_block, min_size=1, max_size=5))
def test_allocation_odd_inputs(rs: Any, blocks: list[Any], jobs: list[Any], budgets: list[float],
                               extras: list[Any]) -> None:
    blocks_t, jobs_t = tuple(blocks), tuple(jobs)
    fr = allocation.Frontier(blocks_t, jobs_t)
    plannable = [max(0.0, b) for b in budgets]  # a negative budget fits no plan: solve asserts it never comes
    assert canon(rs.allocation_solve(blocks_t, jobs_t, plannable)) == canon([fr.solve(b) for b in plannable])
    budget = budgets[0]  # extra blocks are priced at the lab's budget as it is
    fr = allocation.Frontier(blocks_t, jobs_t)
    want = [allocation.extra_price(fr, e, budget) for e in extras]
    assert canon(rs.allocation_with_extra(blocks_t, jobs_t, extras, budget)) == canon(want)
    fr = allocation.Frontier(blocks_t, jobs_t)
    want = allocation.extra_prices(fr, extras, budget)
    assert canon(rs.allocation_with_extras(blocks_t, jobs_t, extras, budget)) == canon(want)
    # the array pass Python takes for large batches gives the same prices
    fr = allocation.Frontier(blocks_t, jobs_t)
    if jobs_t:
        arrays = allocation._price_extras(fr, list(extras), budget)
        assert canon(rs.allocation_with_extras(blocks_t, jobs_t, extras, budget)) == canon(arrays)
    max_energy, budgets_for, grouped = rs.allocation_frontier_facts(blocks_t, jobs_t, extras, budget)
    assert canon(max_energy) == canon(fr.max_energy)
    assert canon(budgets_for) == canon([fr.budget_for(budget, e[3]) for e in extras])
    assert canon(grouped) == canon([allocation._grouped(fr, e, math.inf) for e in extras])
