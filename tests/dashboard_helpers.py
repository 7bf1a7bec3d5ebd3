"""A real evaluation run in a store, for the dashboard's tests (small: two policies, two tasks, three seeds)."""

from __future__ import annotations

from pathlib import Path

from gpu_arena.evaluation import aggregate, run_evaluation
from gpu_arena.evaluation.store import connect, save_run

POLICIES = ("no_negotiation", "rule_expert")
EVAL_TASKS = ("single_trade", "market_round")
SEEDS = (0, 1, 2)


def store_eval_run(db: Path, split: str = "holdout", *, keep_replays: bool = False) -> int:
    """Evaluate :data:`POLICIES` on :data:`EVAL_TASKS` and save the run as ``gpu-arena eval`` does
    (with ``keep_replays``, as ``gpu-arena eval --replays`` does)."""
    results = run_evaluation(list(POLICIES), list(EVAL_TASKS), split, list(SEEDS), workers=1,
                             keep_replays=keep_replays)
    con = connect(db)
    try:
        args = {"policies": list(POLICIES), "tasks": list(EVAL_TASKS), "split": split, "seeds": len(SEEDS)}
        return save_run(con, kind="eval", args=args, seeds=list(SEEDS), rows=aggregate(results), episodes=results,
                        duration_s=1.0)
    finally:
        con.close()
