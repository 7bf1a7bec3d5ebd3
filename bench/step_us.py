"""Microseconds per ``GpuArenaEnv.step`` on fixed seeds, for A/B comparisons of one change.

Run: ``python bench/step_us.py [--opponents default|random_valid] [--reps 4] [--parts]``; prints
one JSON line. Each repetition plays the same episodes (60 / 30 / 20 seeds of single_trade / market_round /
coalition_market, a ``random_valid`` seat with 10% malformed actions against the world's default
opponents or ``random_valid`` ones), timing only the ``step`` calls. The first repetition warms the
process and is dropped; the figure is the minimum over the rest (the least disturbed by the rest
of the machine). The shared frontier cache is cleared before each repetition, so no repetition
reuses another's allocation programs. Compare two builds by alternating their runs; for figures
per calibration unit use ``bench_core.py``.

``--parts`` also splits the step of the fastest repetition: the opponents' moves (each one's view
and decision, the aids it reads priced), the controlled seat's observation (its view and the wire
model) and the rest (reading the action, the engine's round: rules, clock, ledger marks). The
timers add a little to each step, so compare ``--parts`` runs with ``--parts`` runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from typing import Any

from bench_core import timed_episode
from gpu_arena.core import allocation
from gpu_arena.env import GpuArenaEnv
from gpu_arena.native import loader as native
from gpu_arena.native.report import engine_counts

EPISODES = {"single_trade": 60, "market_round": 30, "coalition_market": 20}


class PartsEnv(GpuArenaEnv):
    """The environment with timers around the opponents' moves and the seat's observation (those
    made inside ``step`` only: a reset's observation is not a step's)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spent = {"opponents": 0.0, "observation": 0.0}
        self._stepping = False

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        self._stepping = True
        try:
            return super().step(action, timeout_s, **kwargs)
        finally:
            self._stepping = False

    def _policy_action(self, *args: Any) -> Any:
        t0 = time.perf_counter()
        move = super()._policy_action(*args)
        self.spent["opponents"] += time.perf_counter() - t0
        return move

    def _observe(self) -> Any:
        t0 = time.perf_counter()
        obs = super()._observe()
        if self._stepping:
            self.spent["observation"] += time.perf_counter() - t0
        return obs


def step_parts(task: str, episodes: int, opponents: str | None, reps: int, parts: bool = False,
               engine: str | None = None) -> dict[str, Any]:
    """µs per step of the fastest repetition after the first (``step``), and with ``parts`` its
    split (``opponents``, ``observation``, ``engine``: the rest). ``engine``: the environment's
    (None: its default); the split times the Python core's step, whose opponents Python asks.
    ``engines``: which engine played the episodes of every repetition, and why Python played any."""
    if parts:
        engine = "python"
    best: dict[str, Any] = {"step": float("inf")}
    played: list[Any] = []
    for rep in range(reps):
        allocation._frontier.cache_clear()
        gc.collect()
        env = (PartsEnv if parts else GpuArenaEnv)(task=task, opponents=opponents, engine=engine)
        steps, spent = 0, 0.0
        for seed in range(episodes):
            n, seconds = timed_episode(env, seed, played)
            steps += n
            spent += seconds
        if rep and spent / steps * 1e6 < best["step"]:  # the first repetition warms the process
            best = {"step": spent / steps * 1e6}
            if isinstance(env, PartsEnv):
                best.update({k: v / steps * 1e6 for k, v in env.spent.items()})
                best["engine"] = best["step"] - best["opponents"] - best["observation"]
    best["engines"] = engine_counts(played)
    return best


def step_us(task: str, episodes: int, opponents: str | None, reps: int, engine: str | None = None) -> float:
    return float(step_parts(task, episodes, opponents, reps, engine=engine)["step"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opponents", default="default", help="default (the world's archetypes) or random_valid")
    parser.add_argument("--reps", type=int, default=4, help="repetitions, the first dropped (at least 2)")
    parser.add_argument("--parts", action="store_true", help="also split each step (opponents, observation, engine)"
                        " of the Python core")
    parser.add_argument("--engine", default=None, choices=("auto", "python", "rust"),
                        help="the environment's engine (default: its own default, $GPU_ARENA_ENGINE)")
    args = parser.parse_args()
    opponents = None if args.opponents == "default" else args.opponents
    runs = {task: step_parts(task, n, opponents, max(2, args.reps), args.parts, args.engine)
            for task, n in EPISODES.items()}
    out: dict[str, Any] = {"opponents": args.opponents, "engine": "python" if args.parts else
                           GpuArenaEnv(engine=args.engine).engine,
                           "step_us": {t: round(r["step"]) for t, r in runs.items()},
                           "engines": {t: r["engines"] for t, r in runs.items()}}
    if args.parts:
        out["parts_us"] = {t: {k: round(v) for k, v in r.items() if k not in ("step", "engines")}
                           for t, r in runs.items()}
    print(json.dumps({**out, "native": native.status()}))


if __name__ == "__main__":
    main()
