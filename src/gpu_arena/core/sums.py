"""The economy's one way to add floats: :func:`ordered_sum`, left to right from ``0.0``.

CPython 3.12 changed the built-in ``sum`` of floats to compensated (Neumaier) summation, so the
same floats can add up to a different last bit on 3.11 and on 3.12 (``sum([1e16, 1.0, -1e16])``
is ``0.0`` on 3.11 and ``1.0`` on 3.12), and the Rust engine (``native/``, decision 0026) must
give the Python core's floats bit for bit on every Python the project supports. So no module of
the economy (``core/``, ``policies/``) adds floats with the built-in ``sum``: it calls
:func:`ordered_sum`, which adds them one at a time in the order given, starting at ``0.0``, as
3.11's ``sum`` does and as the Rust engine's ``value::ordered_sum`` does. ``math.fsum`` (exact,
correctly rounded) is the other sum the core uses, where the order must not matter.

The built-in ``sum`` stays for ints (counts, GPU-hours), which add exactly on every version: a
count (``sum(1 for ...)``) as it is, any other sum of ints with an ``# int sum`` comment on its
lines. ``tests/core/test_sums.py`` scans the economy's sources and fails on any other call.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from operator import add


def ordered_sum(values: Iterable[float]) -> float:
    """``values`` added left to right, starting at ``0.0`` (``0.0`` when there are none): the same
    IEEE additions, in the same order, as Python 3.11's built-in ``sum`` of floats, on every
    version. An int among them is added as ``float + int`` adds it (the economy sums floats only)."""
    return reduce(add, values, 0.0)
