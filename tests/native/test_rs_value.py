"""``native/src/value.rs``: Python's value semantics in Rust, compared with Python 3.11 itself.

Every comparison is exact: strings character for character, floats bit for bit (a NaN by being
NaN), errors by type and message. Hypothesis draws the inputs (every float: subnormals, huge,
``-0.0``, infinities, NaN; arbitrary text; nested values; every format spec of the supported
grammar); exhaustive sweeps cover what a sample would miss (every code point's ``repr``, every
power of two, decimal ties in the shortest ``repr``).
"""

from __future__ import annotations

import enum
import math
import struct
import sys
from collections import OrderedDict, namedtuple
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.core.sums import ordered_sum

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="mirrors CPython 3.11")

# The specs the core and the negotiator format floats with (see value.rs's module doc).
CORE_SPECS = ["", ".2f", ".1f", "+.2f", "+.3f", "g"]

floats = st.floats(allow_nan=True, allow_infinity=True)
finite = st.floats(allow_nan=False, allow_infinity=False)
# floats with few significant bits at every scale: their exact decimals are short, so they sit on
# the ties of rounding to n digits (shortest repr, '.2f', round(x, n))
short_binary = st.builds(lambda k, e: math.ldexp(k, e), st.integers(-(2**21), 2**21), st.integers(-80, 80))
money = st.builds(lambda c, f: c / 100 + f, st.integers(-10**9, 10**9), st.sampled_from([0.0, 0.005, -0.005]))
any_float = st.one_of(floats, short_binary, money)


def bits(x: float) -> bytes | str:
    """A float's identity: its bit pattern (any NaN as 'nan')."""
    return "nan" if math.isnan(x) else struct.pack("<d", x)


def same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same value of the same type, floats bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return bits(a) == bits(b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(k1, k2) and same(v1, v2)
            for (k1, v1), (k2, v2) in zip(a.items(), b.items(), strict=True))
    return bool(a == b)


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """``fn(*args)``'s result, or its exception's type and message."""
    try:
        return ("ok", fn(*args))
    except Exception as e:
        return (type(e).__name__, str(e))


def assert_same_outcome(ours: tuple[str, Any], theirs: tuple[str, Any]) -> None:
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        assert same(ours[1], theirs[1]), (ours, theirs)
    else:
        assert ours[1] == theirs[1], (ours, theirs)


# ------------------------------------------------------------------------------------------ floats


@settings(max_examples=500)
@given(any_float)
def test_float_repr_and_str(rs: ModuleType, x: float) -> None:
    assert rs.value_repr(x) == repr(x)
    assert rs.value_str(x) == str(x)


def test_float_repr_sweeps(rs: ModuleType) -> None:
    xs = [math.ldexp(1.0, e) for e in range(-1074, 1024)]  # asymmetric rounding intervals
    xs += [math.nextafter(x, d) for x in xs[1:-1] for d in (0.0, math.inf)]
    # decimal ties between two shortest candidates: 1 + 2**-17 is 1.0000076293945312 in Python
    xs += [1.0 + k * 2.0**-17 for k in range(1, 4000, 2)]
    xs += [m * 2.0**e for m in (1, 3, 5, 7, 9, 11) for e in range(-70, 70)]
    # the switches to exponent notation, and their neighbours
    edges = [1e16, 1e-4, 1e-5, 9999999999999998.0, 0.0001, 1e15, 1e17, 1e22, 1e23]
    xs += [y for x in edges for y in (x, math.nextafter(x, 0.0), math.nextafter(x, math.inf))]
    xs += [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 5e-324, -5e-324, sys.float_info.max,
           sys.float_info.min, 0.1, 0.2, 0.30000000000000004, 1 / 3, 2 / 3, 1.5e20, 123.0]
    xs += [-x for x in xs]
    # one call: a list's repr is its items' reprs
    assert rs.value_repr(xs) == repr(xs)


@given(st.integers(0, 2**64 - 1))
def test_float_repr_of_any_bit_pattern(rs: ModuleType, n: int) -> None:
    (x,) = struct.unpack("<d", n.to_bytes(8, "little"))
    assert rs.value_repr(x) == repr(x)


SIGNS = ["", "+", "-", " "]
TYPES = ["", "f", "F", "e", "E", "g", "G", "%"]
specs = st.builds(
    lambda sign, precision, kind: f"{sign}{'' if precision is None else f'.{precision}'}{kind}",
    st.sampled_from(SIGNS),
    st.one_of(st.none(), st.integers(0, 20), st.integers(0, 400)),
    st.sampled_from(TYPES),
)


@settings(max_examples=300)
@given(any_float, st.sampled_from(CORE_SPECS))
def test_format_core_specs(rs: ModuleType, x: float, spec: str) -> None:
    assert rs.value_format(x, spec) == format(x, spec)
    assert rs.value_format(x, spec) == f"{x:{spec}}"


@settings(max_examples=500)
@given(any_float, specs)
def test_format_every_spec(rs: ModuleType, x: float, spec: str) -> None:
    assert rs.value_format(x, spec) == format(x, spec), spec


@given(st.integers(-(2**53), 2**53), st.sampled_from(["g", ".2f", "+.3f", "e", "%"]))
def test_format_of_ints_as_floats(rs: ModuleType, n: int, spec: str) -> None:
    """``{h:g}`` of an int (GPU-hours in ``judge.py``): ``int.__format__`` converts to float for
    these types, as the Rust side's ``f64`` argument does."""
    assert rs.value_format(n, spec) == format(n, spec)


def test_format_long_precisions_and_ties(rs: ModuleType) -> None:
    cases = [(5e-324, ".1100f"), (5e-324, ".800e"), (sys.float_info.max, ".3f"), (1e23, "f"),
             (0.125, ".2f"), (0.375, ".2f"), (2.5, ".0f"), (0.5, ".0f"), (1.5, ".0f"), (-0.0, "g"),
             (0.0, "e"), (-0.001, ".2f"), (999999.5, "g"), (9.9999995, "g"), (123.0, ".3"),
             (1.0, ".0"), (1e-5, "g"), (1e16, "g"), (1234567.0, "G"), (math.nan, "+.2f"),
             (-math.nan, ".2f"), (math.inf, "%"), (-math.inf, "E"), (1e-300, "%")]
    for x, spec in cases:
        assert rs.value_format(x, spec) == format(x, spec), (x, spec)


@pytest.mark.parametrize("spec", ["x", "d", "s", "!", ".2d", "+c", "é"])
def test_format_unknown_codes_fail_as_in_python(rs: ModuleType, spec: str) -> None:
    with pytest.raises(ValueError) as theirs:
        format(1.0, spec)
    with pytest.raises(ValueError) as ours:
        rs.value_format(1.0, spec)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("spec", [">10", "10.2f", "010.2f", ",.2f", "_g", "#g", "z.2f", "n", "<", "*^8.2f"])
def test_format_unsupported_specs_are_refused(rs: ModuleType, spec: str) -> None:
    format(1.0, spec)  # valid Python ...
    with pytest.raises(ValueError, match="outside what value::format_float supports"):
        rs.value_format(1.0, spec)  # ... that the port leaves out: refused, never wrong


def test_format_missing_precision(rs: ModuleType) -> None:
    with pytest.raises(ValueError, match="Format specifier missing precision"):
        rs.value_format(1.0, ".f")


# ------------------------------------------------------------------------------------------ round

ndigits = st.one_of(st.sampled_from([0, 1, 2, 3, 4, 6, 12]), st.integers(-20, 20), st.integers(-330, 330))


@settings(max_examples=600)
@given(any_float, ndigits)
def test_round(rs: ModuleType, x: float, n: int) -> None:
    assert_same_outcome(outcome(rs.value_round, x, n), outcome(round, x, n))


def test_round_ties_and_extremes(rs: ModuleType) -> None:
    cases = [(2.675, 2), (0.125, 2), (0.375, 2), (2.5, 0), (0.5, 0), (-0.001, 2), (-0.0, 3), (0.0, -2),
             (-0.0, -2), (5.0, -1), (15.0, -1), (25.0, -1), (25.4, -1), (-25.4, -1), (50.0, -2),
             (150.0, -2), (0.4, -1), (9.5, -1), (99.5, -2), (1e300, -300), (5e299, -300),
             (1.5e300, -300), (sys.float_info.max, -308), (sys.float_info.max, -307), (-sys.float_info.max, -308),
             (sys.float_info.max, -309), (5e-324, 323), (5e-324, 324), (1e-320, 320), (123.456, 10**9),
             (123.456, -(10**9)), (-123.456, -(10**9)), (math.inf, 2), (math.nan, -3), (2.0**52 + 0.5, 0),
             (2.0**53, -1), (4503599627370497.5, -1)]
    for x, n in cases:
        assert_same_outcome(outcome(rs.value_round, x, n), outcome(round, x, n))
    xs = [k * 10.0**j + d for k in range(1, 40, 2) for j in range(1, 6) for d in (0.0, 1e-9, -1e-9)]
    for x in xs:
        for n in range(-7, 0):
            assert_same_outcome(outcome(rs.value_round, x, n), outcome(round, x, n))


# ------------------------------------------------------------------------------------------ sums

summands = st.lists(st.one_of(floats, short_binary, st.sampled_from([1e308, -1e308, 1e16, 1.0, -0.0, 1e-16])),
                    max_size=40)


@settings(max_examples=300)
@given(summands)
def test_fsum(rs: ModuleType, xs: list[float]) -> None:
    assert_same_outcome(outcome(rs.value_fsum, xs), outcome(math.fsum, xs))


def test_fsum_cases(rs: ModuleType) -> None:
    cases = [[], [-0.0], [-0.0, -0.0], [0.1] * 10, [1e-16, 1.0, 1e16], [1e16, 1.0, 1e-16],
             [1e100, 1.0, -1e100, 1e-100, 1e50, -1.0, -1e50], [2.0**53, -0.5, -(2.0**-54)],
             [2.0**53, 1.0, 2.0**-100], [1e308, 1e308], [1e308, 1e308, -1e308], [math.inf, -math.inf],
             [math.inf, math.inf, 1.0], [math.nan, 1.0], [math.inf, math.nan], [1e308, math.inf],
             [sys.float_info.max, sys.float_info.max * 2**-53]]
    for xs in cases:
        assert_same_outcome(outcome(rs.value_fsum, xs), outcome(math.fsum, xs))


@settings(max_examples=150)
@given(summands)
def test_ordered_sum(rs: ModuleType, xs: list[float]) -> None:
    assert_same_outcome(outcome(rs.value_ordered_sum, xs), outcome(ordered_sum, xs))


def test_ordered_sum_is_plain_left_to_right_addition(rs: ModuleType) -> None:
    # the core's float sum (core/sums.py), on every Python: 3.11's built-in sum, not 3.12's
    for xs in [[], [-0.0], [0.1] * 10, [1e16, 1.0, -1e16], [1.0, 1e100, 1.0, -1e100]]:
        assert_same_outcome(outcome(rs.value_ordered_sum, xs), outcome(ordered_sum, xs))
    assert rs.value_ordered_sum([0.1] * 10) == 0.9999999999999999  # 3.12's compensated sum gives 1.0
    assert rs.value_ordered_sum([1e16, 1.0, -1e16]) == 0.0  # math.fsum and 3.12's sum give 1.0
    assert same(rs.value_ordered_sum([]), 0.0)


# ------------------------------------------------------------------------------------------ // and %

i64 = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-20, 20))


@settings(max_examples=300)
@given(st.one_of(st.tuples(i64, i64), st.tuples(any_float, st.one_of(any_float, st.sampled_from([0.0, -0.0])))))
def test_floor_division_and_modulo(rs: ModuleType, ab: tuple[Any, Any]) -> None:
    a, b = ab
    if isinstance(a, int) and a == -(2**63) and b == -1:
        return  # see test_int_floor_division_overflow
    assert_same_outcome(outcome(rs.value_floordiv, a, b), outcome(lambda: a // b))
    assert_same_outcome(outcome(rs.value_mod, a, b), outcome(lambda: a % b))
    if isinstance(a, float):
        assert_same_outcome(outcome(rs.value_divmod, a, b), outcome(divmod, a, b))


def test_floor_division_cases(rs: ModuleType) -> None:
    pairs: list[tuple[Any, Any]] = [(-7, 2), (7, -2), (-7, -2), (0, -3), (-9, 3), (5, 0), (0, 0), (-(2**63), 1),
                                    (-(2**63), -2), (-7.5, 2.0), (7.5, -2.0), (-0.0, 3.0), (0.0, -3.0),
                                    (1e-300, -1e300), (-1.0, math.inf), (1.0, 0.0), (math.inf, 2.0),
                                    (5.0, math.nan), (-0.0, -0.0), (3.0, -0.0), (7, 2.0), (-7, 0.5)]
    for a, b in pairs:
        assert_same_outcome(outcome(rs.value_floordiv, a, b), outcome(lambda a=a, b=b: a // b))
        assert_same_outcome(outcome(rs.value_mod, a, b), outcome(lambda a=a, b=b: a % b))
    # the ceiling division in worldgen.py
    for a in range(-30, 31):
        for b in (1, 2, 3, 4, 7):
            assert -rs.value_floordiv(-a, b) == -(-a // b)


def test_int_floor_division_overflow(rs: ModuleType) -> None:
    """``-2**63 // -1`` is ``2**63`` in Python, outside i64: refused, never wrapped."""
    with pytest.raises(OverflowError):
        rs.value_floordiv(-(2**63), -1)
    assert rs.value_mod(-(2**63), -1) == 0


# ------------------------------------------------------------------------------------------ strings


@settings(max_examples=300)
@given(st.one_of(st.text(), st.text(alphabet="'\"\\ab\t\n\r\x00\x1f\x7f\x80\xa0\xad\u2028\ufeff\U0001f600")))
def test_str_repr_and_str(rs: ModuleType, s: str) -> None:
    assert rs.value_repr(s) == repr(s)
    assert rs.value_str(s) == s


def test_str_repr_of_every_code_point(rs: ModuleType) -> None:
    """The printable table is Python 3.11's (Unicode 14.0.0), every code point but the surrogates."""
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    assert rs.value_repr(everything) == repr(everything)
    assert rs.value_repr("'") == repr("'") and rs.value_repr("'\"") == repr("'\"")


@pytest.mark.parametrize("s", ["\ud800", "a\udfff", "\udc80\udc81"])
def test_lone_surrogates_are_refused(rs: ModuleType, s: str) -> None:
    """A Rust ``String`` cannot hold a lone surrogate: extraction raises Python's own
    ``UnicodeEncodeError`` (as ``s.encode()`` does), inside containers too, and never garbles it."""
    for value in (s, [1, s], {s: 1}, {"k": (s,)}):
        with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
            rs.value_repr(value)


@settings(max_examples=200)
@given(st.text(alphabet=st.one_of(st.sampled_from([chr(c) for c in range(0x110000)
                                                   if chr(c).isspace()] + ["\u200b", "\u180e", "\ufeff"]),
                                  st.characters(exclude_categories=("Cs",)))))
def test_strip(rs: ModuleType, s: str) -> None:
    assert rs.value_strip(s) == s.strip()


def test_strip_every_code_point(rs: ModuleType) -> None:
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        s = chr(c)
        if rs.value_strip(s) != s.strip():
            pytest.fail(f"strip differs at U+{c:04X}")


@given(st.text(), st.integers(0, 30))
def test_len_and_prefix(rs: ModuleType, s: str, n: int) -> None:
    assert rs.value_prefix(s, n) == (len(s), s[:n])


# ------------------------------------------------------------------------------------------ values

scalars = st.one_of(st.none(), st.booleans(), i64, any_float, st.text(max_size=8))
keys = st.one_of(st.none(), st.booleans(), i64, finite, st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=200)
@given(values)
def test_values(rs: ModuleType, v: Any) -> None:
    assert rs.value_repr(v) == repr(v)
    assert rs.value_str(v) == str(v)
    assert same(rs.value_roundtrip(v), v)


def test_scalar_kinds(rs: ModuleType) -> None:
    for v in [None, True, False, 0, 1, -1, 2**63 - 1, -(2**63), 0.0, -0.0, 1.0, "", "x", [], (), {}, (1,),
              (1, 2), [1, [2, (3,)]], {"a": 1, 1: "a", None: [], 2.5: (), False: True}]:
        assert rs.value_repr(v) == repr(v)
        assert rs.value_str(v) == str(v)
        assert same(rs.value_roundtrip(v), v)
    assert rs.value_roundtrip(True) is True and rs.value_roundtrip(None) is None


class Color(enum.IntEnum):
    RED = 1


class Text(str):
    def __repr__(self) -> str:
        return "Text(...)"


class Amount(float):
    def __repr__(self) -> str:
        return "Amount(...)"


class Ids(list[Any]):
    pass


Pair = namedtuple("Pair", "a b")


def test_subclasses_read_as_their_base(rs: ModuleType) -> None:
    """A subclass of str/int/float/list/tuple/dict is read as its base value, as ``json`` reads it
    (its own ``__repr__`` is not consulted)."""
    cases: list[tuple[Any, Any]] = [
        (Color.RED, 1), (Text("a'b"), "a'b"), (Amount(2.5), 2.5), (Ids([Text("x"), Color.RED]), ["x", 1]),
        (Pair(1, Amount(0.5)), (1, 0.5)), (OrderedDict([("b", 1), ("a", Color.RED)]), {"b": 1, "a": 1}),
    ]
    for sub, base in cases:
        assert rs.value_repr(sub) == repr(base)
        assert rs.value_str(sub) == str(base)
        assert same(rs.value_roundtrip(sub), base)


@pytest.mark.parametrize("n", [2**63, -(2**63) - 1, 10**30])
def test_ints_outside_i64_are_refused(rs: ModuleType, n: int) -> None:
    with pytest.raises(OverflowError):
        rs.value_repr(n)
    with pytest.raises(OverflowError):
        rs.value_repr([1, {"k": n}])


@pytest.mark.parametrize("v", [object(), {1, 2}, b"bytes", 1j, frozenset(), range(3), [1, {2}]])
def test_other_types_are_refused(rs: ModuleType, v: Any) -> None:
    with pytest.raises(TypeError):
        rs.value_repr(v)


def test_depth_is_bounded(rs: ModuleType) -> None:
    ok: Any = 1
    for _ in range(200):
        ok = [ok]
    assert rs.value_repr(ok) == repr(ok)
    with pytest.raises(ValueError, match="nested deeper"):
        rs.value_repr([ok])
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="nested deeper"):
        rs.value_repr(loop)
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="nested deeper"):
        rs.value_str(cycle)
