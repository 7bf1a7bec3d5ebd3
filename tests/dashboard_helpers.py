"""Real runs in a store, for the dashboard's tests: an evaluation run (small: two policies, two tasks, three
seeds), a training run logged through the run log, and a whole `gpu-arena train pipeline` run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def store_training_run(db: Path, kind: str = "grpo", steps: int = 4) -> int:
    """A training run logged through the run log's writer API (the one the trainers use), with the
    metric names the Training section charts. The values are a test's, not a trainer's: what the
    dashboard tests check is that the page draws exactly what the API returns."""
    from gpu_arena.core.types import REWARD_COLUMNS
    from gpu_arena.training.runlog import connect as connect_runs
    from gpu_arena.training.runlog import finish_run, log_metrics, start_run

    con = connect_runs(db)
    try:
        run = start_run(con, kind=kind, config={"preset": "tiny", "task": "single_trade"}, preset="tiny",
                        model="tiny-llama", output_dir="runs/test")
        for step in range(1, steps + 1):
            metrics = {"loss": 2.0 / step, "reward": -0.05 + 0.01 * step, "reward_std": 0.02,
                       "arena/valid_action_rate": 0.5 + 0.1 * step, "arena/format_error_rate": 0.1 / step,
                       "tokens_per_s": 100.0 * step}
            metrics.update({f"rewards/{c}/mean": 0.001 * step * (i + 1) for i, c in enumerate(REWARD_COLUMNS)})
            log_metrics(con, run, step, float(step), metrics)
        finish_run(con, run, status="finished", duration_s=float(steps), summary={"steps": steps})
        return run
    finally:
        con.close()


def watched(page: Any, timeout_ms: int) -> Any:
    """``page`` with ``timeout_ms`` as its default timeout and ``page.problems``: every console error
    or warning, page error and failed request it meets (a test asserts the list stays empty)."""
    page.set_default_timeout(timeout_ms)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.problems = problems
    return page


PIPELINE_TASK = "single_trade"


def pipeline_store(factory: Any) -> Path:
    """A directory whose ``arena.db`` holds one real ``gpu-arena train pipeline`` run (tiny preset, one
    RL iteration, evaluated on :data:`PIPELINE_TASK` only; its output in ``run/``), made once per test
    session: pytest-xdist's workers share it through a lock beside their temporary directories, and a
    failed attempt is reported to every later caller instead of being run again."""
    import fcntl
    import os

    from gpu_arena.training.pipeline import PipelineRun, run_pipeline

    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "pipeline-store"
    with open(shared / "pipeline-store.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if (root / "failed").exists():
            raise RuntimeError(f"the pipeline store could not be made: {(root / 'failed').read_text()}")
        if not (root / "done").exists():
            root.mkdir(exist_ok=True)
            try:
                run_pipeline(PipelineRun(output=str(root / "run"), preset="tiny", db=str(root / "arena.db"),
                                         workers=1, rl_iterations=1, eval_tasks=(PIPELINE_TASK,)))
            except BaseException as e:
                (root / "failed").write_text(f"{type(e).__name__}: {e}")
                raise
            (root / "done").write_text("ok")
    return root
