"""In-process throughput of the arena, as JSON, with ratios to the shared calibration loop.

Run: ``make bench`` (or ``python bench/bench_core.py --seconds 3``).

For each task, every seat acts every round (the controlled seat and all opponents are
``random_valid`` policies on their own views, with 10% malformed actions mixed in). Three
figures are measured, each divided by ``calib_ops_per_s`` from ``../shared/bench/calib.py`` run
in this same process (before and after, averaged):

* ``env_steps_per_s``: ``GpuArenaEnv.step`` calls (one round: the controlled seat's action plus
  every opponent's, the pydantic observation with decision aids returned), resets excluded.
* ``env_default_steps_per_s``: the same step against the world's default opponents (its
  archetypes), as the reference was measured (``anchors.json`` of the benchmark kit:
  ``env_default_vs_reference`` is the ratio issue #17 asks to bring to 1 or more), on the
  environment's default engine (``engine``: the Rust engine of decision 0026 where it is built);
  ``env_default_python_*``: the same step on the Python core.
* ``env_episodes_per_s``: whole episodes including ``reset``.
* ``seat_actions_per_s`` / ``rounds_per_s``: the core engine alone (``Episode.step`` with one
  action per seat, views without the what-if decision aids), the figure a trainer stepping
  many seats or a simulator sees.
* ``floor_*``: the part of a step that no engine, however fast, removes while the contract
  holds (decision 0006, "The floor"): each opponent's fresh view of a state whose index and
  valuation are already built (copying only), each opponent's ``act`` on its view, and the
  pydantic wrapping of the controlled seat's view. ``floor_steps_per_calib`` is the rate a step
  made of those parts alone would reach; where it is below ``target_steps_per_calib``, the
  target cannot be met by work on the engine.
* ``floor_default_*``: the same floor (of the Python core) against the world's default opponents (their aids priced
  before the clock starts, their ``act`` timed on views that hold them), and ``budget_left_us``:
  the reference's step time (``reference_step_us``) less that floor, the time a step may spend
  in the engine and in pricing the aids if it is to match the reference; ``engine_us``, what they
  take today (the step less its floor), and ``engine_speedup_needed``, the ratio of the two.

The issue's reference (the previous arena on this machine) scored 0.106 / 0.101 / 0.054 steps
per calibration unit on single_trade / market_round / coalition_market.
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_arena.core.engine import Episode
from gpu_arena.core.policy import RandomPolicy
from gpu_arena.core.types import TASKS
from gpu_arena.env import GpuArenaEnv
from gpu_arena.models import observation_from_view
from gpu_arena.native import loader as native
from gpu_arena.native.report import engine_counts
from gpu_arena.policies import make_policy

REFERENCE = {"single_trade": 0.106, "market_round": 0.101, "coalition_market": 0.054}
CALIB = Path(__file__).resolve().parents[1].parent / "shared" / "bench" / "calib.py"
ANCHORS = CALIB.parent / "anchors.json"


def anchored_reference() -> dict[str, float]:
    """The reference's ``env.step`` with a random controlled seat against its default opponents, per
    calibration unit (the benchmark kit's anchors), or nothing where the kit is not beside us."""
    if not ANCHORS.exists():
        return {}
    data = json.loads(ANCHORS.read_text()).get("reference_env_step_random_seat", {})
    return {k: float(v) for k, v in data.items() if not k.startswith("_")}


def load_calib() -> Any:
    spec = importlib.util.spec_from_file_location("calib", CALIB)
    if spec is None or spec.loader is None or not CALIB.exists():
        raise SystemExit(f"calibration loop not found at {CALIB}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed_episode(env: GpuArenaEnv, seed: int, played: list[Any] | None = None) -> tuple[int, float]:
    """One episode of a random controlled seat (its actions built from its own wire observation,
    10% malformed): (steps, seconds inside ``step``). ``played`` is told the episode's engine
    report (which engine played it and why: ``gpu_arena.native.report``)."""
    steps, step_time = 0, 0.0
    obs = env.reset(seed=seed)
    driver = make_policy("random_valid", seed=seed, invalid_rate=0.1)
    while not obs.done:
        action = driver.act(obs)
        t0 = time.perf_counter()
        obs = env.step(action)
        step_time += time.perf_counter() - t0
        steps += 1
    if played is not None:
        played.append(env.engine_report())
    return steps, step_time


def _time_steps(env: GpuArenaEnv, seconds: float) -> tuple[int, int, float, float, dict[str, Any]]:
    """:func:`timed_episode` on seeds 0, 1, ... for about ``seconds``: (steps, episodes, seconds
    inside ``step``, seconds in all, which engine played the episodes: ``engine_counts``)."""
    steps = episodes = 0
    step_time = 0.0
    played: list[Any] = []
    t_start = time.perf_counter()
    while time.perf_counter() - t_start < seconds:
        n, spent = timed_episode(env, episodes, played)
        steps += n
        step_time += spent
        episodes += 1
    return steps, episodes, step_time, time.perf_counter() - t_start, engine_counts(played)


def bench_env(task: str, seconds: float) -> dict[str, Any]:
    steps, episodes, step_time, total, engines = _time_steps(GpuArenaEnv(task=task, opponents="random_valid"),
                                                              seconds)
    return {"env_steps_per_s": steps / step_time, "env_episodes_per_s": episodes / total, "env_steps": steps,
            "env_engines": engines}


def bench_env_default(task: str, seconds: float, engine: str | None = None) -> dict[str, Any]:
    """``GpuArenaEnv.step`` as the reference was measured: the same random controlled seat against
    the world's default opponents (its archetypes), resets excluded; on ``engine`` (None: the
    environment's default), under ``env_default_<engine>_*`` where one is named. ``*_engines``:
    which engine played its episodes, and why the Python core played any."""
    steps, _episodes, step_time, _total, engines = _time_steps(GpuArenaEnv(task=task, engine=engine), seconds)
    name = "env_default" if engine is None else f"env_default_{engine}"
    return {f"{name}_steps_per_s": steps / step_time, f"{name}_steps": steps, f"{name}_engines": engines}


def bench_core(task: str, seconds: float) -> dict[str, float]:
    rounds = actions = 0
    elapsed = 0.0
    seed = 0
    while elapsed < seconds:
        ep = Episode.new(task, "train", seed, controlled=())
        pols = {lid: RandomPolicy(seed * 7 + i, invalid_rate=0.1) for i, lid in enumerate(ep.world.labs)}
        t0 = time.perf_counter()
        while not ep.done:
            ep.step({lid: p.act(ep.observe(lid, aids=False)) for lid, p in pols.items()})
            rounds += 1
            actions += len(pols)
        elapsed += time.perf_counter() - t0
        seed += 1
    return {"rounds_per_s": rounds / elapsed, "seat_actions_per_s": actions / elapsed}


def step_floor(env: GpuArenaEnv, seconds: float, wrap: Callable[[Any], object]) -> dict[str, float]:
    """Per step of ``env``'s episodes (the seat driven by ``random_valid``): the opponents' fresh views
    of a state whose index and valuers are already built, copied without the what-if aids (copying
    only: an engine could keep the aids' numbers too), their ``act`` on the views their policies
    read, and ``wrap`` of the controlled seat's view. Nothing else is timed, and the cyclic GC is off
    while they are, so the figures are a lower bound of their cost."""
    views = acts = wrapped = 0.0
    steps = seed = 0
    t_start = time.perf_counter()
    while time.perf_counter() - t_start < seconds:
        obs = env.reset(seed=seed)
        driver = make_policy("random_valid", seed=seed, invalid_rate=0.1)
        ep = env.episode
        assert ep is not None
        # copies of the opponents, made once an episode: a copy shown the same view as its original
        # decides and remembers the same, so it keeps in step while its act() is timed and the
        # episode's own policies, RNGs and memories are left alone
        twins = copy.deepcopy(env.policies)
        aids = {lid: getattr(p, "uses_aids", True) for lid, p in twins.items()}
        while not obs.done:
            seen = {lid: ep.observe(lid, aids=aids[lid]) for lid in twins}  # builds index, valuers, aids
            for twin in twins.values():
                if getattr(twin, "needs_world", False):
                    twin.bind(ep.world)  # as the environment binds the original (the oracle)
            view = ep.observe(ep.controlled[0])
            gc.disable()
            try:
                t0 = time.perf_counter()
                for lid in twins:
                    ep.observe(lid, aids=False)
                t1 = time.perf_counter()
                for lid, twin in twins.items():
                    twin.act(seen[lid])
                t2 = time.perf_counter()
                wrap(view)
                t3 = time.perf_counter()
            finally:
                gc.enable()
            views, acts, wrapped = views + t1 - t0, acts + t2 - t1, wrapped + t3 - t2
            steps += 1
            obs = env.step(driver.act(obs))
        seed += 1
    out = {"floor_views_us": views / steps * 1e6, "floor_acts_us": acts / steps * 1e6,
           "floor_wrap_us": wrapped / steps * 1e6}
    out["floor_steps_per_s"] = steps / (views + acts + wrapped)
    return out


def bench_floor(task: str, seconds: float) -> dict[str, float]:
    """The floor of the step ``bench_env`` times: ``random_valid`` opponents, the pydantic observation."""
    return step_floor(GpuArenaEnv(task=task, opponents="random_valid", engine="python"), seconds,
                      observation_from_view)


def bench_floor_default(task: str, seconds: float) -> dict[str, float]:
    """The floor of the step ``bench_env_default`` times (the world's default opponents, their aids
    priced before the clock starts), under ``floor_default_*``: set against the reference's step
    time, it says how much of that time is left for the engine and the aids' valuations."""
    floor = step_floor(GpuArenaEnv(task=task, engine="python"), seconds, observation_from_view)
    return {k.replace("floor_", "floor_default_", 1): v for k, v in floor.items()}


def against_reference(row: dict[str, Any], anchor: float, unit: float) -> dict[str, Any]:
    """Issue #17's target figures for one task's ``row`` (``env_default_*`` and ``floor_default_*``
    measured), given the reference's steps per calibration unit (``anchor``) and this run's
    calibration ops/s (``unit``)."""
    step_us = 1e6 / row["env_default_python_steps_per_s"]
    floor_us = 1e6 / row["floor_default_steps_per_s"]
    out: dict[str, Any] = {
        "reference_env_default_steps_per_calib": anchor,
        # the target: this ratio at or above 1 on every task (the environment's default engine)
        "env_default_vs_reference": row["env_default_steps_per_s"] / unit / anchor,
        "env_default_python_vs_reference": row["env_default_python_steps_per_s"] / unit / anchor,
        "env_default_us": 1e6 / row["env_default_steps_per_s"],
        # the reference's whole step time, and the part of it this step's floor leaves to the
        # engine and the valuations (negative: the floor alone is slower than the reference)
        "reference_step_us": 1e6 / (anchor * unit),
    }
    out["budget_left_us"] = out["reference_step_us"] - floor_us
    # what the Python core's engine and aids' valuations take (its step less its floor), and how
    # many times faster they must get for the target with that floor (None: no time is left)
    out["engine_us"] = step_us - floor_us
    out["engine_speedup_needed"] = out["engine_us"] / out["budget_left_us"] if out["budget_left_us"] > 0 else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="time per task and measurement")
    args = parser.parse_args()
    calib = load_calib()
    # warm the caches and imports once so the first task is not charged for them
    bench_env("single_trade", 0.5)
    tasks: dict[str, Any] = {}
    units: list[float] = []
    for task in TASKS:
        # the host is shared and its speed drifts: calibrate right around each task's measurement
        before = calib.calib_ops_per_s(1.0)
        row: dict[str, Any] = {**bench_env(task, args.seconds), **bench_env_default(task, args.seconds),
                               **bench_env_default(task, args.seconds, "python"),
                               **bench_core(task, args.seconds), **bench_floor(task, args.seconds),
                               **bench_floor_default(task, args.seconds)}
        after = calib.calib_ops_per_s(1.0)
        unit = (before + after) / 2
        units.append(unit)
        row["calib_ops_per_s"] = unit
        for key in ("env_steps_per_s", "env_default_steps_per_s", "env_default_python_steps_per_s",
                    "env_episodes_per_s", "rounds_per_s",
                    "seat_actions_per_s", "floor_steps_per_s", "floor_default_steps_per_s"):
            row[key.replace("_per_s", "_per_calib")] = row[key] / unit
        anchor = anchored_reference().get(task)
        if anchor:
            row.update(against_reference(row, anchor, unit))
        row["reference_steps_per_calib"] = REFERENCE[task]
        row["target_steps_per_calib"] = 10 * REFERENCE[task]
        row["env_steps_vs_reference"] = row["env_steps_per_calib"] / REFERENCE[task]
        row["seat_actions_vs_reference"] = row["seat_actions_per_calib"] / REFERENCE[task]
        row["floor_vs_target"] = row["floor_steps_per_calib"] / row["target_steps_per_calib"]
        tasks[task] = row
    print(json.dumps({
        "benchmark": "core", "calib_ops_per_s_mean": sum(units) / len(units),
        "python": sys.version.split()[0], "machine": platform.machine(), "seconds_per_measure": args.seconds,
        # whether the Rust engine loaded (make install builds it; GPU_ARENA_NATIVE=0 leaves it unloaded)
        "native": native.status(), "engine": GpuArenaEnv().engine, "tasks": tasks,
    }, indent=2))


if __name__ == "__main__":
    main()
