"""Time for the full holdout evaluation table (6 policies x 3 tasks x N seeds on W workers), as JSON.

Run: ``make bench`` (or ``python bench/bench_eval.py --seeds 100 --workers 2``). Two figures:
``cold_s`` with an empty optimum cache (every world's exact optimum is solved, the first run on a
machine) and ``warm_s`` with the cache the cold run filled (every later run over the same seeds).
"""

from __future__ import annotations

import argparse
import json
import time

from gpu_arena.evaluation import run_evaluation
from gpu_arena.native.report import engine_counts
from gpu_arena.policies import BASELINES

TASKS = ("single_trade", "market_round", "coalition_market")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    optima: dict = {}
    t0 = time.perf_counter()
    cold = run_evaluation(BASELINES, TASKS, "holdout", seeds, workers=args.workers, optima=optima)
    cold_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    warm = run_evaluation(BASELINES, TASKS, "holdout", seeds, workers=args.workers, optima=optima)
    warm_s = time.perf_counter() - t0
    assert [r.episode_return for r in cold] == [r.episode_return for r in warm]
    print(json.dumps({"benchmark": "holdout_table", "policies": list(BASELINES), "tasks": list(TASKS),
                      "seeds": args.seeds, "workers": args.workers, "episodes": len(cold),
                      "cold_s": cold_s, "warm_s": warm_s, "target_s": 60.0,
                      # which engine played the episodes, and why the Python core played any
                      "engines": engine_counts((r.engine, r.engine_reason) for r in cold)}, indent=2))


if __name__ == "__main__":
    main()
