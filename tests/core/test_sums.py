"""The economy adds floats in one order on every Python (issue 30, item 5).

CPython 3.12's built-in ``sum`` of floats is compensated (Neumaier); 3.11's, and the Rust engine's,
adds left to right. The economy calls :func:`gpu_arena.core.sums.ordered_sum` instead, and these
tests fail if 3.12's semantics crept into it, or if a built-in ``sum`` of anything but ints came
back into the economy's sources.
"""

from __future__ import annotations

import ast
import io
import math
import tokenize
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gpu_arena.core.sums import ordered_sum

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "gpu_arena"
# the economy: the core (every module the Rust engine mirrors, world generation, the optimum) and
# the policies (the mirrored archetypes and negotiator, and the scripted baselines the
# evaluation's rows and the fingerprint play)
ECONOMY = ("core", "policies")
MARKER = "# int sum"  # on a line of a built-in sum() whose items are ints (exact on every version)


def neumaier_sum(values: list[float]) -> float:
    """CPython 3.12's built-in ``sum`` of floats (``builtin_sum_impl``): Neumaier's compensation,
    the correction added at the end where it is nonzero."""
    total, c = 0.0, 0.0
    for x in values:
        t = total + x
        if abs(total) >= abs(x):
            c += (total - t) + x
        else:
            c += (x - t) + total
        total = t
    return total + c if c and math.isfinite(c) else total


def left_to_right(values: list[float]) -> float:
    total = 0.0
    for x in values:
        total = total + x
    return total


def test_ordered_sum_is_311s_left_to_right_sum_not_312s_compensated_one():
    values = [1e16, 1.0, -1e16]
    assert ordered_sum(values) == 0.0  # 3.11's sum, and the Rust engine's
    assert math.fsum(values) == 1.0 == neumaier_sum(values)  # the exact sum, and 3.12's sum
    assert ordered_sum([0.1] * 10) == 0.9999999999999999  # 3.12's sum gives 1.0
    assert neumaier_sum([0.1] * 10) == 1.0


def test_ordered_sum_of_nothing_is_a_float_zero():
    assert repr(ordered_sum([])) == "0.0"
    assert repr(ordered_sum(iter([-0.0]))) == "0.0"  # 0.0 + -0.0, as 3.11's sum([-0.0])
    assert ordered_sum(x for x in (0.5, 0.25)) == 0.75


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), max_size=30))
def test_ordered_sum_adds_left_to_right_bit_for_bit(values):
    expected = left_to_right(values)
    got = ordered_sum(values)
    assert math.copysign(1.0, got) == math.copysign(1.0, expected) and (got == expected or got != got)


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), max_size=20))
def test_ordered_sum_is_the_builtin_sum_of_this_interpreter_only_where_that_adds_left_to_right(values):
    # on 3.11 the built-in sum of floats is ordered_sum; on 3.12 and later it need not be, which is
    # why the economy does not call it
    import sys

    if sys.version_info < (3, 12):
        assert ordered_sum(values) == sum(values, 0.0)


# ---------------------------------------------------------------- no built-in sum over floats


def _economy_sources() -> list[Path]:
    return sorted(p for part in ECONOMY for p in (PACKAGE / part).rglob("*.py"))


def _marked_lines(source: str) -> set[int]:
    return {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT and MARKER in tok.string}


def _int_literal_items(call: ast.Call) -> bool:
    """``sum(1 for ...)``: a count, provably an int."""
    if len(call.args) != 1 or call.keywords:
        return False
    arg = call.args[0]
    return (isinstance(arg, ast.GeneratorExp | ast.ListComp) and isinstance(arg.elt, ast.Constant)
            and type(arg.elt.value) is int)


def builtin_float_sums(path: Path, root: Path = PACKAGE) -> list[str]:
    """Each use of the built-in ``sum`` in ``path`` not provably over ints: ``file:line`` (the file
    named within ``root``)."""
    source = path.read_text()
    tree = ast.parse(source)
    marked = _marked_lines(source)
    shadowed = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | {
        a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    if "sum" in shadowed:
        return [f"{path.relative_to(root)}: binds the name sum"]
    calls = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Name) and node.id == "sum"):
            continue
        call = calls.get(id(node))
        if call is not None:
            lines = set(range(call.lineno, (call.end_lineno or call.lineno) + 1))
            if _int_literal_items(call) or lines & marked:
                continue
        # a call over anything else, or sum passed on (map(sum, ...)): not provably ints
        found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_the_economy_adds_floats_only_with_ordered_sum():
    sources = _economy_sources()
    assert any(p.name == "engine.py" for p in sources) and any(p.name == "negotiator.py" for p in sources)
    offending = [hit for path in sources for hit in builtin_float_sums(path)]
    assert not offending, (
        "a built-in sum() in the economy that is not provably over ints (3.12 adds floats in another "
        f"order): call gpu_arena.core.sums.ordered_sum, or mark a sum of ints with {MARKER!r}: {offending}")


def test_the_scan_finds_a_float_sum_and_passes_marked_and_counting_ones(tmp_path):
    cases = {
        "x = sum(b.value for b in bs)\n": 1,
        "x = sum(b.hours for b in bs)  # int sum: GPU-hours\n": 0,
        "x = sum(\n    b.hours for b in bs\n)  # int sum\n": 0,
        "x = sum(1 for b in bs if b)\n": 0,
        "x = sum(1.0 for b in bs)\n": 1,
        "x = list(map(sum, rows))\n": 1,
        "from numpy import sum\nx = sum(rows)\n": 1,
    }
    for text, expected in cases.items():
        path = tmp_path / "probe.py"
        path.write_text(text)
        hits = builtin_float_sums(path, tmp_path)
        assert len(hits) == expected, (text, hits)
