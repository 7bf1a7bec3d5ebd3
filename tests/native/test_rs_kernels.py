"""The Rust kernels (``native/src/kernels.rs``) against :mod:`gpu_arena.core.kernels`, bit for bit.

Every ``kernels_<name>`` of the Rust module must return what the Python kernel returns: the same
structure (tuples, lists, dicts in the same order, ``None``), the same int and float types, and the
same floats to the last bit (compared by :meth:`float.hex`, so -0.0 differs from 0.0). The inputs
are the kernels' arguments recorded from whole episodes of the three tasks, then generated ones
within the ranges the worlds draw, then edges. The reference is ``kernels.py`` loaded a second
time under another name, which the recorder's patches of ``gpu_arena.core.kernels`` never reach.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpu_arena.core import allocation, kernels
from gpu_arena.policies import make_policy
from gpu_arena.testing import play

TASKS = ("single_trade", "market_round", "coalition_market")
# the kernels allocation.py calls; solve_frontier's arguments also drive radix, dp, state_values, job_value
RECORDED = ("solve_frontier", "best_plan", "frontier_groups", "grouped_extra", "scan_extra")
INF = float("inf")


def _source_kernels() -> ModuleType:
    """kernels.py loaded again under another name (the recorder patches the real module)."""
    path = Path(allocation.__file__).with_name("kernels.py")
    spec = importlib.util.spec_from_file_location("kernels_as_source", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


source = _source_kernels()


def same(a: Any, b: Any) -> bool:
    """Equal in structure, types and every float's bits (dicts in the same order)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex()
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return same(list(a.items()), list(b.items()))
    return bool(a == b)


def check(rs: ModuleType, name: str, *args: Any) -> Any:
    """``kernels_<name>`` of the Rust module equals the Python kernel on ``args``; the result."""
    want = getattr(source, name)(*args)
    got = getattr(rs, f"kernels_{name}")(*args)
    assert same(got, want), f"{name}{args!r}:\n rust   {got!r}\n python {want!r}"
    return want


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[tuple[Any, ...]]]:
    """The arguments of every kernel call allocation.py made in whole episodes of each task (two
    train seeds with the oracle in every seat, one holdout seed with random valid moves)."""
    calls: dict[str, list[tuple[Any, ...]]] = {name: [] for name in RECORDED}
    originals = {name: getattr(kernels, name) for name in RECORDED}

    def recorder(name: str) -> Callable[..., Any]:
        inner = originals[name]

        def record(*args: Any) -> Any:
            calls[name].append(args)
            return inner(*args)
        return record

    allocation._frontier.cache_clear()  # frontiers solved earlier would hide their calls
    try:
        for name in RECORDED:
            setattr(kernels, name, recorder(name))
        for task in TASKS:
            for seed in (0, 1):
                play(task, "train", seed, lambda seed: make_policy("oracle", seed=seed))
            play(task, "holdout", 3, lambda seed: make_policy("random_valid", seed=seed))
    finally:
        for name, inner in originals.items():
            setattr(kernels, name, inner)
        allocation._frontier.cache_clear()
    assert all(calls[name] for name in RECORDED), {name: len(c) for name, c in calls.items()}
    return calls


def _unique(items: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return list(dict.fromkeys(items))


def test_recorded_solve_frontier_and_its_parts(rs: ModuleType, recorded: dict[str, list[tuple[Any, ...]]]) -> None:
    pairs = _unique(recorded["solve_frontier"])
    assert any(len(jobs) >= 3 for _, jobs in pairs)  # coalition_market's larger labs are in
    for blocks, jobs in pairs:
        radix, codes, _, _, _ = check(rs, "solve_frontier", blocks, jobs)
        check(rs, "radix", jobs)
        check(rs, "dp", blocks, jobs, radix)
        check(rs, "state_values", codes, jobs, radix)
        for job in jobs:
            for hours in range(-1, job[0] + 2):
                check(rs, "job_value", job[4], job[0], job[5], hours)
                check(rs, "job_value", job[4], job[0], job[5], float(hours))


@pytest.mark.parametrize("name", ["best_plan", "frontier_groups", "grouped_extra", "scan_extra"])
def test_recorded_calls(rs: ModuleType, recorded: dict[str, list[tuple[Any, ...]]], name: str) -> None:
    unique = {repr(args): args for args in recorded[name]}  # best_plan's parent dicts are unhashable
    for args in unique.values():
        check(rs, name, *args)


def test_recorded_frontiers_priced_with_other_blocks(rs: ModuleType,
                                                     recorded: dict[str, list[tuple[Any, ...]]]) -> None:
    """Every recorded frontier, each block priced as an extra and planned, under binding budgets too."""
    pairs = _unique(recorded["solve_frontier"])
    extras = sorted({block for blocks, _ in pairs for block in blocks})[::7]
    for blocks, jobs in pairs:
        fr = allocation.Frontier(blocks, jobs)
        nojob, per_job = check(rs, "frontier_groups", jobs, fr.columns, fr.base, fr.neg_e)
        budgets = (INF, fr.max_energy, fr.max_energy / 2, 0.0)
        for budget in budgets:
            check(rs, "best_plan", fr.codes, fr.neg_e, fr.base, fr.parents, len(jobs), budget)
        for extra in extras:
            check(rs, "grouped_extra", jobs, nojob, per_job, extra, 1e-9)
            for budget in budgets[::2]:
                check(rs, "scan_extra", jobs, fr.states, fr.neg_e, fr.vals, fr.base, extra, budget)


# ---------------------------------------------------------------- generated inputs

# the ranges the worlds draw (recorded: requirements 4..94, fixed hours 0..42, block hours 2..24);
# a few exact values of each float make ties, which the 1e-12 rules and the groups must break alike
reliability_st = st.sampled_from([0.8, 0.85, 0.9, 0.95, 1.0]) | st.floats(0.5, 1.0)
energy_st = st.sampled_from([0.0, 1.0, 2.5, 3.0]) | st.floats(0.0, 60.0)
block_st = st.tuples(st.integers(1, 24), st.integers(0, 12), reliability_st, energy_st)
small_job_st = st.tuples(st.integers(0, 16), st.integers(0, 8), st.integers(0, 12), reliability_st,
                         st.sampled_from([0.0, 10.0, 12.5]) | st.floats(0.0, 600.0),
                         st.sampled_from([0.0, 0.2, 0.25, 0.5]) | st.floats(0.0, 1.0))
large_job_st = st.tuples(st.integers(0, 100), st.integers(0, 45), st.integers(0, 12), reliability_st,
                         st.floats(0.0, 600.0), st.sampled_from([0.0, 0.3, 0.5]))
jobs_st = st.lists(small_job_st, max_size=4) | st.lists(large_job_st, max_size=2)
budget_st = st.floats(0.0, 200.0) | st.just(INF) | st.just(0.0)


@settings(max_examples=250, deadline=None)
@given(st.lists(block_st, max_size=8), jobs_st, st.lists(block_st, min_size=1, max_size=3), budget_st)
def test_generated_worlds(rs: ModuleType, blocks: list, jobs: list, extras: list, budget: float) -> None:
    b, j = tuple(blocks), tuple(jobs)
    radix, codes, _, _, _ = check(rs, "solve_frontier", b, j)
    check(rs, "radix", j)
    check(rs, "dp", b, j, radix)
    check(rs, "state_values", codes, j, radix)
    fr = allocation.Frontier(b, j)
    nojob, per_job = check(rs, "frontier_groups", j, fr.columns, fr.base, fr.neg_e)
    for bud in (budget, INF):
        check(rs, "best_plan", fr.codes, fr.neg_e, fr.base, fr.parents, len(j), bud)
    for extra in extras:
        check(rs, "scan_extra", j, fr.states, fr.neg_e, fr.vals, fr.base, extra, budget)
        check(rs, "grouped_extra", j, nojob, per_job, extra, 1e-9)
        check(rs, "grouped_extra", j, nojob, per_job, extra, 0.0)


tie_st = st.sampled_from([-5.0, -1.0, -0.0, 0.0, 2.5]) | st.floats(-50.0, 50.0)


@st.composite
def groups_inputs(draw: st.DrawFn) -> tuple[tuple, list[list[int]], tuple[float, ...], tuple[float, ...]]:
    """frontier_groups' arguments outside any frontier: free hours columns and many exact ties."""
    jobs = tuple(draw(st.lists(small_job_st, max_size=4)))
    hours = st.tuples(*[st.integers(-2, 6) | st.integers(-2, 18) for _ in jobs])
    rows = draw(st.lists(st.tuples(tie_st, tie_st, hours), max_size=30))
    columns = [[row[2][k] for row in rows] for k in range(len(jobs))]
    return jobs, columns, tuple(row[0] for row in rows), tuple(row[1] for row in rows)


@settings(max_examples=150, deadline=None)
@example(((((4, 0, 5, 0.8, 10.0, 0.5),), [[1, 1, 1, 1]], (1.0, 1.0, 0.0, 3.0), (0.0, 0.0, 0.0, -2.0))),
         [(2, 1, 1.0, 0.0)], 0.0)  # a tie with a group's top is its runner-up
@given(groups_inputs(), st.lists(block_st, min_size=1, max_size=3), st.sampled_from([0.0, 1e-9, 1.0]))
def test_generated_groups_with_ties(rs: ModuleType, inputs: tuple, extras: list, clear: float) -> None:
    jobs, columns, bases, neg_es = inputs
    nojob, per_job = check(rs, "frontier_groups", jobs, columns, bases, neg_es)
    for extra in extras:
        check(rs, "grouped_extra", jobs, nojob, per_job, extra, clear)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.0, 600.0) | st.integers(0, 600), st.integers(-3, 100),
       st.floats(-0.5, 1.0) | st.sampled_from([0.0, 0.5]),
       st.integers(-5, 120) | st.floats(-5.0, 120.0, allow_nan=False) | st.sampled_from([INF, -INF]))
def test_generated_job_values(rs: ModuleType, value: float, required: int, partial_credit: float,
                              hours: float) -> None:
    check(rs, "job_value", value, required, partial_credit, hours)


# ---------------------------------------------------------------- edges

def _no_jobs() -> Iterator[tuple[tuple, tuple]]:
    yield (), ()
    yield ((3, 2, 0.9, 1.5), (5, 4, 1.0, 0.0)), ()
    yield ((3, 2, 0.9, 1.5),), ((0, 0, 5, 0.8, 10.0, 0.5), (4, 9, 5, 0.8, 0.0, 0.5))  # nothing usable


@pytest.mark.parametrize("pair", list(_no_jobs()))
def test_frontiers_without_usable_jobs(rs: ModuleType, pair: tuple[tuple, tuple]) -> None:
    """No jobs: bases are the int 0 of sum(), the values list is empty; no usable job: no parents."""
    blocks, jobs = pair
    check(rs, "solve_frontier", blocks, jobs)
    fr = allocation.Frontier(blocks, jobs)
    check(rs, "best_plan", fr.codes, fr.neg_e, fr.base, fr.parents, len(jobs), INF)
    nojob, per_job = check(rs, "frontier_groups", jobs, fr.columns, fr.base, fr.neg_e)
    for extra in blocks or ((2, 1, 1.0, 0.5),):
        check(rs, "scan_extra", jobs, fr.states, fr.neg_e, fr.vals, fr.base, extra, INF)
        check(rs, "grouped_extra", jobs, nojob, per_job, extra, 1e-9)


def test_job_value_keeps_the_value_object_and_int_hours_past_any_float(rs: ModuleType) -> None:
    assert rs.kernels_job_value(7, 3, 0.5, 3) == 7 and type(rs.kernels_job_value(7, 3, 0.5, 3.0)) is int
    check(rs, "job_value", 7, 3, 0.5, 2)
    check(rs, "job_value", 10.0, 2**53 + 1, 0.5, float(2**53))  # exact float/int comparison
    check(rs, "job_value", 10.0, 5, 0.5, float("nan"))


def test_division_by_zero_raises_as_in_python(rs: ModuleType) -> None:
    codes, neg_e, bases, parents = (5,), (0.0,), (1.0,), ({5: 10},)
    for module, name in ((source, "best_plan"), (rs, "kernels_best_plan")):
        with pytest.raises(ZeroDivisionError):
            getattr(module, name)(codes, neg_e, bases, parents, 0, INF)
    jobs = ((4, 0, 5, 0.8, 10.0, 0.5),)
    for module, name in ((source, "dp"), (rs, "kernels_dp")):
        with pytest.raises(ZeroDivisionError):
            getattr(module, name)(((2, 1, 1.0, 1.0),), jobs, ((0, 5),))


def test_negative_digits_floor_as_python_does(rs: ModuleType) -> None:
    """Negative fixed hours or block hours make negative packed states: // and % floor."""
    blocks = ((-3, 1, 1.0, 1.0), (2, 1, 1.0, 0.5), (-1, 1, 1.0, 0.25))
    jobs = ((4, -2, 5, 0.8, 10.0, 0.5), (3, -7, 5, 0.8, 6.0, 0.25))
    _, codes, neg_e, parents, base = check(rs, "solve_frontier", blocks, jobs)
    assert min(codes) < 0
    check(rs, "best_plan", codes, neg_e, tuple(base), parents, len(jobs), INF)


def test_ints_past_64_bits_raise_instead_of_wrapping(rs: ModuleType) -> None:
    """Python's ints grow; the Rust kernels refuse rather than return a wrapped state."""
    big = ((2**40, 0, 5, 0.8, 10.0, 0.5),) * 3
    assert len(source.radix(big)) == 3
    with pytest.raises(OverflowError):
        rs.kernels_radix(big)
    assert same(rs.kernels_radix(big[:2]), source.radix(big[:2]))  # the third multiplier overflows
    with pytest.raises(OverflowError):
        rs.kernels_job_value(1.0, 2**70, 0.5, 3)
