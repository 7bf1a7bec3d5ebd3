"""The benchmarks' measuring code runs and measures what it says (no speed target is asserted here:
targets live in ``make bench``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_core
import bench_server


@pytest.mark.parametrize("task", ["single_trade", "coalition_market"])
def test_core_floor_is_part_of_a_step(task: str) -> None:
    floor = bench_core.bench_floor(task, 0.3)
    step = bench_core.bench_env(task, 0.3)
    assert all(floor[k] > 0 for k in ("floor_views_us", "floor_acts_us", "floor_wrap_us"))
    # the floor is a subset of a step's work: a step cannot be cheaper than it
    assert floor["floor_steps_per_s"] > step["env_steps_per_s"]


def test_served_floor_measures_every_part() -> None:
    floor = bench_server.served_floor("market_round", 0.3)
    assert all(floor[k] > 0 for k in ("floor_views_us", "floor_acts_us", "floor_wrap_us"))
    total_us = floor["floor_views_us"] + floor["floor_acts_us"] + floor["floor_wrap_us"]
    assert floor["floor_steps_per_s"] == pytest.approx(1e6 / total_us)
