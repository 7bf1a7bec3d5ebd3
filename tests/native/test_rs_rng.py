"""The Rust port of ``random.Random`` (``native/src/rng.rs``) against CPython's, call by call.

Every test draws from both generators and compares exact values (floats by ``repr``, which
round-trips), exceptions by type and message, and the full ``getstate()`` afterwards.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

I64 = 2**63
SEEDS = [0, 1, 2, 42, -1, -42, 2**32 - 1, 2**32, 2**32 + 1, 2**63 - 1, -(2**63), 2**64, 2**64 + 7,
         3**100, -(7**77), 12345678901234567890123456789]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Op = tuple[Any, ...]


def outcome(call: Callable[[], object]) -> tuple[str, str]:
    """``("ok", repr(value))`` or ``(exception name, message)``."""
    try:
        return "ok", repr(call())
    except (ValueError, IndexError, TypeError) as e:
        return type(e).__name__, str(e)


def py_op(r: random.Random, op: Op) -> object:
    """One call on CPython's generator."""
    name, *args = op
    if name == "shuffle":
        x = list(range(args[0]))
        r.shuffle(x)
        return x
    if name in ("choice", "sample"):
        return getattr(r, name)(list(range(args[0])), *args[1:])
    if name == "sample_counts":
        counts, k = args
        return r.sample(list(range(len(counts))), k, counts=counts)
    if name == "choices":
        n, k, weights, cum = args
        return r.choices(list(range(n)), weights, cum_weights=cum, k=k)
    if name == "randbelow":
        return getattr(r, "_randbelow")(args[0])  # noqa: B009 (private; mypy does not know it)
    return getattr(r, name)(*args)


def rs_op(r: Any, op: Op) -> object:
    """The same call on the Rust generator."""
    name, *args = op
    if name == "shuffle":
        return r.shuffle(list(range(args[0])))
    if name in ("choice", "sample"):
        return getattr(r, name)(list(range(args[0])), *args[1:])
    if name == "sample_counts":
        counts, k = args
        return r.sample(list(range(len(counts))), k, counts=counts)
    if name == "choices":
        n, k, weights, cum = args
        return r.choices(list(range(n)), weights, cum_weights=cum, k=k)
    return getattr(r, name)(*args)


def assert_same(py: random.Random, rsr: Any, ops: list[Op]) -> None:
    for i, op in enumerate(ops):
        expected = outcome(partial(py_op, py, op))
        got = outcome(partial(rs_op, rsr, op))
        assert got == expected, f"op #{i} {op!r}"
    assert rsr.getstate() == py.getstate()


# ---- strategies --------------------------------------------------------------------------------

small = st.integers(-50, 50)
i64 = st.integers(-I64, I64 - 1)
finite = st.floats(-1e9, 1e9, allow_nan=False)
weights = st.lists(st.one_of(st.floats(-1.0, 50.0, allow_nan=False), st.integers(-1, 20)), max_size=12)


@st.composite
def choices_op(draw: st.DrawFn) -> Op:
    n = draw(st.integers(0, 12))
    k = draw(st.integers(-1, 8))
    kind = draw(st.sampled_from(["plain", "weights", "cum", "cum_unsorted"]))
    if kind == "plain":
        return ("choices", n, k, None, None)
    w = draw(st.one_of(weights, st.lists(st.floats(0.0, 9.0), min_size=n, max_size=n)))
    if kind.startswith("cum"):  # CPython takes any cum_weights and bisects them as they are
        cum = [float(x) for x in (sorted(w) if kind == "cum" else w)]
        return ("choices", n, k, None, cum)
    return ("choices", n, k, [float(x) for x in w], None)


ops = st.one_of(
    st.tuples(st.just("random")),
    st.tuples(st.just("getrandbits"), st.integers(0, 130)),
    st.tuples(st.just("randbelow"), st.one_of(st.integers(1, 300), st.integers(1, 2**64 - 1))),
    st.tuples(st.just("randrange"), st.one_of(small, st.integers(1, 2**62))),
    st.tuples(st.just("randrange"), small, small),
    st.tuples(st.just("randrange"), i64, i64),
    st.tuples(st.just("randrange"), small, small, small),
    st.tuples(st.just("randrange"), i64, i64, st.integers(-(2**40), 2**40)),
    st.tuples(st.just("randint"), small, small),
    st.tuples(st.just("randint"), i64, i64),
    st.tuples(st.just("choice"), st.integers(0, 30)),
    st.tuples(st.just("shuffle"), st.integers(0, 40)),
    st.tuples(st.just("sample"), st.integers(0, 60), st.integers(-1, 61)),
    st.tuples(st.just("sample"), st.integers(60, 3000), st.integers(0, 12)),
    st.tuples(st.just("sample_counts"), st.lists(st.integers(-1, 6), max_size=8), st.integers(-1, 10)),
    choices_op(),
    st.tuples(st.just("uniform"), finite, finite),
    st.tuples(st.just("gauss"), finite, st.floats(0.0, 10.0)),
)


# ---- seeding -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_seed_state_and_stream(rs: ModuleType, seed: int) -> None:
    py, r = random.Random(seed), rs.Random(seed)
    assert r.getstate() == py.getstate()
    assert [r.random() for _ in range(1500)] == [py.random() for _ in range(1500)]  # crosses a twist
    assert r.getstate() == py.getstate()


@pytest.mark.parametrize("seed", [1.5, -0.25, 1e300, "gpu arena", "", b"\x00\xff", bytearray(b"ab"), True])
def test_other_seed_types(rs: ModuleType, seed: float | str | bytes | bytearray) -> None:
    py, r = random.Random(seed), rs.Random(seed)
    assert r.getstate() == py.getstate()
    assert [r.getrandbits(32) for _ in range(10)] == [py.getrandbits(32) for _ in range(10)]


def test_reseed(rs: ModuleType) -> None:
    py, r = random.Random(3), rs.Random(3)
    py.gauss()
    r.gauss()
    py.seed(2**90)
    r.seed(2**90)
    assert r.getstate() == py.getstate()  # gauss_next forgotten too


@FAST
@given(seed=st.integers(-(2**300), 2**300))
def test_any_int_seed(rs: ModuleType, seed: int) -> None:
    py, r = random.Random(seed), rs.Random(seed)
    assert r.getstate() == py.getstate()
    assert r.random() == py.random()


def test_getrandbits_every_width(rs: ModuleType) -> None:
    py, r = random.Random(99), rs.Random(99)
    for k in [*range(0, 200), 1000, 4096, 4097]:
        assert r.getrandbits(k) == py.getrandbits(k), k
    assert r.getstate() == py.getstate()
    with pytest.raises(ValueError):
        r.getrandbits(-1)


# ---- mixed call sequences --------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.one_of(small, st.integers(-(2**100), 2**100)), sequence=st.lists(ops, max_size=40))
def test_mixed_sequences(rs: ModuleType, seed: int, sequence: list[Op]) -> None:
    assert_same(random.Random(seed), rs.Random(seed), sequence)


@FAST
@given(seed=small, before=st.lists(ops, max_size=15), after=st.lists(ops, max_size=15),
       burn=st.integers(0, 700))
def test_handover_both_ways(rs: ModuleType, seed: int, before: list[Op], after: list[Op], burn: int) -> None:
    """Python -> Rust midway (any index, with or without gauss_next), then Rust -> Python."""
    py = random.Random(seed)
    py.getrandbits(32 * burn)  # any index into the 624 words
    for op in before:
        outcome(partial(py_op, py, op))
    r = rs.Random.from_state(py.getstate())
    assert r.getstate() == py.getstate()
    assert_same(py, r, after)
    back = random.Random()
    back.setstate(r.getstate())
    assert_same(back, r, after)


def test_handover_at_twist_boundaries(rs: ModuleType) -> None:
    for words in (0, 1, 623, 624, 625, 1247, 1248):
        py = random.Random(7)
        for _ in range(words):
            py.getrandbits(32)
        r = rs.Random.from_state(py.getstate())
        assert [r.getrandbits(32) for _ in range(700)] == [py.getrandbits(32) for _ in range(700)]
        r2 = rs.Random(0)
        r2.setstate(py.getstate())
        assert r2.getstate() == py.getstate()


def test_gauss_next_travels(rs: ModuleType) -> None:
    py = random.Random(5)
    py.gauss(1.0, 2.0)  # leaves gauss_next set
    state = py.getstate()
    assert state[2] is not None
    r = rs.Random.from_state(state)
    assert r.getstate() == state
    assert [r.gauss(0.5, 3.0) for _ in range(9)] == [py.gauss(0.5, 3.0) for _ in range(9)]


def test_version_2_state(rs: ModuleType) -> None:
    py = random.Random(11)
    _, internal, gauss_next = py.getstate()
    signed = (*(w - 2**32 if w >= 2**31 else w for w in internal[:-1]), internal[-1])
    v2 = (2, signed, gauss_next)
    r = rs.Random.from_state(v2)
    py.setstate(v2)
    assert r.getstate() == py.getstate()
    assert r.random() == py.random()


@pytest.mark.parametrize(
    "state",
    [
        (3, (0,) * 624 + (625,), None),  # index past N
        (3, (0,) * 624 + (-1,), None),
        (3, (0,) * 624, None),  # wrong size
        (1, (0,) * 625, None),  # unknown version
    ],
)
def test_bad_states(rs: ModuleType, state: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError) as expected:
        random.Random().setstate(state)
    with pytest.raises(ValueError) as got:
        rs.Random.from_state(state)
    assert type(got.value) is type(expected.value)


def test_a_changed_state_changes_the_stream(rs: ModuleType) -> None:
    """The comparisons above can fail: one flipped bit of state shows in the output."""
    py = random.Random(1)
    _, internal, g = py.getstate()
    # (only mt[0]'s top bit ever feeds the twist, so flip a bit of mt[5])
    r = rs.Random.from_state((3, (*internal[:5], internal[5] ^ 1, *internal[6:]), g))
    assert [r.random() for _ in range(700)] != [py.random() for _ in range(700)]


# ---- sequences ---------------------------------------------------------------------------------


def test_shuffle_lengths(rs: ModuleType) -> None:
    py, r = random.Random(2024), rs.Random(2024)
    for n in [*range(0, 40), 100, 1000]:
        x = [f"item{i}" for i in range(n)]
        expected = list(x)
        py.shuffle(expected)
        assert r.shuffle(x) == expected
    assert r.getstate() == py.getstate()


def _setsize(k: int) -> int:
    size = 21
    if k > 5:
        size += 4 ** math.ceil(math.log(k * 3, 4))
    return size


def test_sample_both_methods(rs: ModuleType) -> None:
    """Every k up to 70 with n on each side of CPython's pool/set threshold, plus small n."""
    py, r = random.Random(31337), rs.Random(31337)
    for k in range(0, 70):
        for n in {k, k + 1, _setsize(k) - 1, _setsize(k), _setsize(k) + 1, 3 * k + 2}:
            if n < k:
                continue
            pop = list(range(100, 100 + n))
            assert r.sample(pop, k) == py.sample(pop, k), (n, k)
    assert r.getstate() == py.getstate()
    assert r.sample([], 0) == py.sample([], 0) == []
    assert r.sample(["only"], 1) == py.sample(["only"], 1)


def test_sample_large_population(rs: ModuleType) -> None:
    py, r = random.Random(8), rs.Random(8)
    pop = list(range(50_000))
    for k in (0, 1, 6, 50, 500):
        assert r.sample(pop, k) == py.sample(pop, k)
    assert r.getstate() == py.getstate()


def test_choice_and_choices_lengths(rs: ModuleType) -> None:
    py, r = random.Random(77), rs.Random(77)
    for n in range(1, 30):
        seq = [str(i) for i in range(n)]
        assert r.choice(seq) == py.choice(seq)
        assert r.choices(seq, k=5) == py.choices(seq, k=5)
        w = [float((i * 7) % 5) + 0.5 for i in range(n)]
        assert r.choices(seq, w, k=4) == py.choices(seq, w, k=4)
        cum = [sum(w[: i + 1]) for i in range(n)]
        assert r.choices(seq, cum_weights=cum, k=4) == py.choices(seq, cum_weights=cum, k=4)
    assert r.choices(["a", "b"], [0.0, 1.0], k=0) == []
    assert r.getstate() == py.getstate()


def test_choices_any_cum_weights(rs: ModuleType) -> None:
    """CPython bisects cum_weights as given (hi = n - 1), sorted or not, floats or ints."""
    maker = random.Random(0)
    py, r = random.Random(55), rs.Random(55)
    for case in range(300):
        n = maker.randint(1, 14)
        cum: list[float] = [maker.uniform(0.0, 9.0) for _ in range(n)]
        if case % 3 == 0:
            cum.sort()
        elif case % 3 == 1:
            cum = [float(maker.randint(0, 5)) for _ in range(n - 1)] + [float(maker.randint(1, 5))]
        seq = list(range(n))
        assert r.choices(seq, cum_weights=cum, k=6) == py.choices(seq, cum_weights=cum, k=6), cum
        w = [maker.choice([0.0, 0.1, 0.2, 1.0, 2.5, 1e-9]) for _ in range(n)]
        if sum(w) > 0:
            assert r.choices(seq, w, k=3) == py.choices(seq, w, k=3), w
    assert r.getstate() == py.getstate()


@pytest.mark.parametrize(
    "op",
    [
        ("randrange", 0),
        ("randrange", -3),
        ("randrange", 5, 5),
        ("randrange", 5, 1),
        ("randrange", 0, 10, 0),
        ("randrange", 0, 10, -1),
        ("randint", 3, 2),
        ("choice", 0),
        ("sample", 3, 4),
        ("sample", 3, -1),
        ("sample_counts", [], 0),
        ("sample_counts", [0, 0], 1),
        ("sample_counts", [2, 1], 4),
        ("choices", 0, 1, None, None),
        ("choices", 0, 1, [], None),
        ("choices", 2, 1, [1.0], None),
        ("choices", 2, 1, [0.0, 0.0], None),
        ("choices", 2, 1, [1.0, math.inf], None),
        ("choices", 2, 1, None, [1.0, math.nan]),
        ("choices", 2, 1, [1.0, 1.0], [1.0, 2.0]),
    ],
)
def test_errors_match(rs: ModuleType, op: Op) -> None:
    py, r = random.Random(4), rs.Random(4)
    expected = outcome(partial(py_op, py, op))
    assert expected[0] != "ok", expected
    assert outcome(partial(rs_op, r, op)) == expected
    assert r.getstate() == py.getstate()  # the same draws before the error


def test_randrange_step_without_stop(rs: ModuleType) -> None:
    with pytest.raises(TypeError):
        random.Random(1).randrange(10, step=2)
    with pytest.raises(TypeError):
        rs.Random(1).randrange(10, step=2)
    assert rs.Random(1).randrange(10, step=1) == random.Random(1).randrange(10, step=1)


def test_extremes(rs: ModuleType) -> None:
    py, r = random.Random(-9), rs.Random(-9)
    calls: list[Op] = [
        ("randint", -I64, I64 - 1),
        ("randrange", -I64, I64 - 1),
        ("randrange", I64 - 1, -I64, -(2**62)),
        ("randbelow", 2**64 - 1),
        ("randbelow", 1),
        ("randbelow", 2**32),
        ("randbelow", 2**32 + 1),
        ("uniform", 5, 5),
        ("uniform", 1e308, -1e308),
    ]
    assert_same(py, r, calls * 20)
