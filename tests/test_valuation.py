"""The valuation against brute force: a lab's best allocation and the welfare optimum."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.core.valuation import (
    LabValuer,
    best_allocation,
    block_fits,
    job_value,
    social_optimum,
    welfare_lower_bound,
)
from helpers import block, job, make_world

blocks_st = st.lists(
    st.tuples(st.sampled_from([1, 2, 4, 8]), st.integers(1, 6), st.integers(1, 3),
              st.sampled_from([0.7, 0.85, 0.95]), st.sampled_from([0.05, 0.3, 1.5, 4.0])),
    min_size=0, max_size=5)
jobs_st = st.lists(
    st.tuples(st.sampled_from([2, 4, 6, 8, 12]), st.integers(2, 9), st.floats(1.0, 80.0),
              st.sampled_from([0.0, 0.8, 0.9]), st.sampled_from([0.0, 0.3, 0.5])),
    min_size=1, max_size=3)


def build(bspec, jspec, budget=1000.0, owner_of=lambda i: "lab_0"):
    blocks = [block(f"b_{i}", owner_of(i), gpus=g, start=s, duration=d, rel=r, energy=e)
              for i, (g, s, d, r, e) in enumerate(bspec)]
    jobs = [job(f"j_0_{k}", "lab_0", hours=h, deadline=dl, value=round(v, 2), min_rel=mr, pc=pc)
            for k, (h, dl, v, mr, pc) in enumerate(jspec)]
    return make_world(blocks, jobs, budget=budget)


def brute_force(blocks, jobs, budget=float("inf")):
    best = 0.0
    for assign in itertools.product(range(-1, len(jobs)), repeat=len(blocks)):
        hours = [0] * len(jobs)
        energy = 0.0
        ok = True
        for b, k in zip(blocks, assign, strict=True):
            if k < 0:
                continue
            if not block_fits(b, jobs[k]):
                ok = False
                break
            hours[k] += b.hours
            energy += b.energy_cost * b.hours
        if not ok or energy > budget + 1e-9:
            continue
        value = sum(job_value(j.value, j.gpu_hours_required, j.partial_credit, h) for j, h in zip(jobs, hours, strict=True))
        best = max(best, value - energy)
    return best


@settings(max_examples=300)
@given(blocks_st, jobs_st, st.sampled_from([1000.0, 20.0, 3.0, 0.0]))
def test_best_allocation_matches_brute_force(bspec, jspec, budget):
    w = build(bspec, jspec, budget=budget)
    blocks = [b for b in w.blocks.values() if b.start_round > 0]
    plan = best_allocation(w, "lab_0")
    assert plan.net == pytest.approx(brute_force(blocks, list(w.jobs.values()), budget), abs=1e-9)
    assert plan.energy <= budget + 1e-9
    # the plan it returns is feasible and worth what it says
    hours: dict[str, int] = {}
    for bid, jid in plan.assignment.items():
        assert block_fits(w.blocks[bid], w.jobs[jid])
        hours[jid] = hours.get(jid, 0) + w.blocks[bid].hours
    value = sum(job_value(j.value, j.gpu_hours_required, j.partial_credit, hours.get(j.job_id, 0))
                for j in w.jobs.values())
    assert value == pytest.approx(plan.value, abs=1e-9)


@settings(max_examples=200)
@given(blocks_st, jobs_st, st.sampled_from([1000.0, 10.0]))
def test_one_more_block_shortcut_matches_full_plan(bspec, jspec, budget):
    w = build(bspec[:-1] if bspec else bspec, jspec, budget=budget)
    extra = block("b_x", "lab_1", gpus=4, start=3, duration=2, energy=0.2)
    v = LabValuer(w, "lab_0")
    full = v.plan(extra=[extra])
    assert v.net(extra=[extra]) == pytest.approx(full.net, abs=1e-9)
    job = v.job_for(extra)
    if job is not None:  # the shortcut's choice is a best plan too (ties may pick another job)
        with_choice = v.plan(extra=[extra]).assignment.get("b_x")
        assert with_choice is not None


@settings(max_examples=150)
@given(blocks_st, jobs_st)
def test_social_optimum_matches_brute_force(bspec, jspec):
    w = build(bspec, jspec, owner_of=lambda i: f"lab_{i % 2}")
    blocks, jobs = list(w.blocks.values()), list(w.jobs.values())
    exact = brute_force(blocks, jobs)
    assert social_optimum(blocks, jobs) == pytest.approx(exact, abs=1e-6)
    assert welfare_lower_bound(blocks, jobs) <= exact + 1e-9


def test_partial_credit_and_reliability_floor():
    w = make_world([block("b_0", "lab_0", gpus=2, duration=2, rel=0.85)],
                   [job("j_0_0", "lab_0", hours=8, value=40.0, pc=0.5, min_rel=0.8)])
    plan = best_allocation(w, "lab_0")
    assert plan.value == pytest.approx(40.0 * 0.5 * 4 / 8)
    w.blocks["b_0"].reliability = 0.79
    assert best_allocation(w, "lab_0").value == 0.0
