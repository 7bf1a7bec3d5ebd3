"""League throughput, as JSON: a league of five scripted entrants, 200 matches on market_round, on
two worker processes (issue #19's target: within 60 s).

Run: ``make bench`` (or ``python bench/bench_league.py``). Reported: the wall time of the run (the
matches played on the process pool, stored, and the ratings computed over them), matches per
second, and whether ``rule_expert`` is rated above ``random_valid``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from gpu_arena.league import run_league

ENTRANTS = ["rule_expert", "random_valid", "no_negotiation", "always_accept", "greedy_hoarder"]
TARGET_S = 60.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--matches", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--task", default="market_round")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        table = run_league(ENTRANTS, [args.task], args.matches, 0, db=str(Path(tmp) / "arena.db"),
                           workers=args.workers)
        seconds = time.perf_counter() - t0
    order = [r["name"] for r in table["entrants"]]
    print(json.dumps({
        "benchmark": "league", "entrants": ENTRANTS, "task": args.task, "matches": args.matches,
        "workers": args.workers, "seconds": seconds, "matches_per_s": args.matches / seconds,
        "engines": table["engines"],  # which engine played the matches, and why the Python core did
        "target_s": TARGET_S, "meets_target": seconds <= TARGET_S,
        "rule_expert_above_random_valid": order.index("rule_expert") < order.index("random_valid"),
        "table": [{k: r[k] for k in ("name", "mu", "sigma", "conservative", "matches", "mean_surplus")}
                  for r in table["entrants"]],
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
