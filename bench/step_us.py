"""Microseconds per ``GpuArenaEnv.step`` on fixed seeds, for A/B comparisons of one change.

Run: ``python bench/step_us.py [--opponents default|random_valid] [--reps 4]``; prints one JSON
line. Each repetition plays the same episodes (60 / 30 / 20 seeds of single_trade / market_round /
coalition_market, a ``random_valid`` seat with 10% malformed actions against the world's default
opponents or ``random_valid`` ones), timing only the ``step`` calls. The first repetition warms the
process and is dropped; the figure is the minimum over the rest (the least disturbed by the rest
of the machine). The shared frontier cache is cleared before each repetition, so no repetition
reuses another's allocation programs. Compare two builds by alternating their runs; for figures
per calibration unit use ``bench_core.py``.
"""

from __future__ import annotations

import argparse
import gc
import json

from bench_core import timed_episode
from gpu_arena.core import allocation, native
from gpu_arena.env import GpuArenaEnv

EPISODES = {"single_trade": 60, "market_round": 30, "coalition_market": 20}


def step_us(task: str, episodes: int, opponents: str | None, reps: int) -> float:
    best = float("inf")
    for rep in range(reps):
        allocation._frontier.cache_clear()
        gc.collect()
        env = GpuArenaEnv(task=task, opponents=opponents)
        steps, spent = 0, 0.0
        for seed in range(episodes):
            n, seconds = timed_episode(env, seed)
            steps += n
            spent += seconds
        if rep:  # the first repetition warms the process
            best = min(best, spent / steps * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opponents", default="default", help="default (the world's archetypes) or random_valid")
    parser.add_argument("--reps", type=int, default=4, help="repetitions, the first dropped (at least 2)")
    args = parser.parse_args()
    opponents = None if args.opponents == "default" else args.opponents
    us = {task: round(step_us(task, n, opponents, max(2, args.reps))) for task, n in EPISODES.items()}
    print(json.dumps({"opponents": args.opponents, "step_us": us, "native": native.status()}))


if __name__ == "__main__":
    main()
