"""Reading finished pipelines back: one role's holdout episodes from the store, and two pipelines'
models compared world by world (``gpu-arena train compare``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .pipeline import Paths, load_state
from .presets import PresetError


def pipeline_returns(root: str | Path, role: str = "trained") -> tuple[str, list[tuple[str, str, int, float]]]:
    """One role's holdout episodes of a finished pipeline (``trained``, ``sft`` or a baseline): its
    policy name and ``(task, split, seed, return)`` per episode, read from the evaluation run the
    evidence names, in the store the pipeline wrote to."""
    from ..evaluation.store import connect

    paths = Paths(Path(root))
    if not paths.evidence.exists():
        raise PresetError(f"{paths.evidence} not found: run the pipeline's eval stage first")
    evidence = json.loads(paths.evidence.read_text())
    policy = (evidence.get("policies") or {}).get(role)
    if policy is None:
        raise PresetError(f"no role {role!r} in {paths.evidence}; roles: {', '.join(evidence.get('policies') or {})}")
    con = connect(load_state(paths).get("config", {}).get("db"))
    try:
        rows = con.execute("SELECT task, split, seed, episode_return FROM episodes WHERE run_id = ? AND policy = ?",
                           (int(evidence["eval_run_id"]), policy)).fetchall()
    finally:
        con.close()
    if not rows:
        raise PresetError(f"evaluation run {evidence['eval_run_id']} has no episodes of {policy} in the store")
    return policy, [(str(t), str(sp), int(sd), float(r)) for t, sp, sd, r in rows]


def compare_pipelines(first: str | Path, second: str | Path, role: str = "trained") -> list[dict[str, Any]]:
    """``role`` of pipeline ``first`` minus the same role of pipeline ``second``, paired by holdout
    world (task, split, seed) with a 95% bootstrap CI: e.g. an RL run against its control
    (``--rl-worlds 0``) on the same SFT start."""
    from ..evaluation import paired_differences

    _, a = pipeline_returns(first, role)
    _, b = pipeline_returns(second, role)
    rows = [("first", *x) for x in a] + [("second", *x) for x in b]
    out = [{"task": r["task"], "split": r["split"], "n": r["n"], "mean_diff": r["mean_diff"], "ci_low": r["ci_low"],
            "ci_high": r["ci_high"], "wins": r["wins"], "losses": r["losses"]}
           for r in paired_differences(rows, "first") if r["versus"] == "second"]
    if not out:  # e.g. one evaluated on the validation range, the other on the test range
        raise PresetError(f"{first} and {second} share no holdout world (task and seed): evaluate both on the same "
                          f"tasks and --eval-range")
    return out


__all__ = ["compare_pipelines", "pipeline_returns"]
