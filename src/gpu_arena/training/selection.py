"""Choosing the trained checkpoint on validation seeds: the pipeline's ``select`` stage (early stopping).

An RL stage that saves checkpoints (``--rl-save-every N``) leaves several candidates: ``rl/checkpoint-N``,
``rl/checkpoint-2N``, ... and the final ``rl/``. Expert iteration does not move a model monotonically
(a task gained in one iteration can be lost in the next), so the last checkpoint is not always the
best one. With ``--rl-select K`` the pipeline plays every candidate and the SFT start on the
**last** ``K`` seeds of the validation range and keeps the candidate with the best
:func:`score` as the ``trained`` model the evaluation measures.

Why these seeds: the evaluation plays the *first* seeds of its range, so on the validation range the
choice and the judgement never share a seed (``--eval-seeds`` + ``--rl-select`` may not exceed the
range); and the test and check ranges are never read to choose. The choice is recorded in
``select.json`` and in the evidence, so a reader sees which checkpoint was reported and why.

The criterion follows what the evidence asks of a trained model, "better than its SFT start on every
task": for each task the paired difference candidate − SFT by seed, as a t statistic (mean over its
standard error, so tasks with small returns weigh as much as tasks with large ones); a candidate's
score is its worst task's. The highest score wins; a tie goes to the earlier checkpoint (less training
for the same measured result).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..evaluation.ranges import get_range

SELECT_NAME = "select.json"
SELECT_RANGE = "validation"
CRITERION = "max over checkpoints of min over tasks of t(candidate - sft), paired by seed; ties: the earlier"
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")


def selection_seeds(n: int) -> list[int]:
    """The validation range's last ``n`` seeds (the evaluation plays its first ones)."""
    r = get_range(SELECT_RANGE)
    if not 1 <= n <= r.size:
        raise ValueError(f"the {r.name} range holds {r.size:,} seeds; asked for {n:,}")
    return list(range(r.last - n + 1, r.last + 1))


@dataclass(frozen=True)
class Candidate:
    """One checkpoint the RL stage left: ``name`` as the run directory spells it (``rl`` is the
    final one), the RL iteration it was saved after, and where it is."""

    name: str
    iteration: int
    path: Path


def candidates(rl: Path, iterations: int) -> list[Candidate]:
    """The RL stage's checkpoints, earliest first: every ``rl/checkpoint-N`` and the final ``rl/``
    (after ``iterations``)."""
    found = []
    for d in rl.glob("checkpoint-*"):
        m = _CHECKPOINT.search(d.name)
        if m and d.is_dir() and (d / "config.json").exists():
            found.append(Candidate(f"rl/{d.name}", int(m.group(1)), d))
    found.sort(key=lambda c: c.iteration)
    return [*found, Candidate("rl", iterations, rl)]


def t_statistic(diffs: Sequence[float]) -> float:
    """Mean over standard error of paired differences: 0 when every difference is 0, ±inf when they
    are all equal and not 0 (no spread to divide by). A spread below a billionth of the largest
    difference is rounding, not spread, so the statistic does not depend on the returns' scale."""
    n = len(diffs)
    if n == 0:
        raise ValueError("no paired seeds to score")
    mean = math.fsum(diffs) / n
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    tol = 1e-9 * max(abs(d) for d in diffs)
    if sd <= tol:
        return 0.0 if abs(mean) <= tol else math.copysign(math.inf, mean)
    return mean / (sd / math.sqrt(n))


def score(start: dict[tuple[str, int], float], candidate: dict[tuple[str, int], float],
          tasks: Sequence[str]) -> tuple[float, dict[str, dict[str, float]]]:
    """A candidate's score (its worst task's t statistic against the start, paired by seed) and, per
    task, the mean difference, its t statistic and the seeds paired. Returns are keyed (task, seed)."""
    per_task = {}
    for task in tasks:
        seeds = sorted(s for (t, s) in candidate if t == task and (t, s) in start)
        diffs = [candidate[(task, s)] - start[(task, s)] for s in seeds]
        per_task[task] = {"mean_diff": sum(diffs) / len(diffs) if diffs else 0.0, "t": t_statistic(diffs),
                          "n": len(diffs)}
    return min(v["t"] for v in per_task.values()), per_task


def choose(start: dict[tuple[str, int], float], played: Sequence[tuple[Candidate, dict[tuple[str, int], float]]],
           tasks: Sequence[str]) -> dict[str, Any]:
    """The selection record: every candidate's score and per-task figures, and the chosen one's name
    (the highest score; the earliest of a tie, ``played`` being earliest first)."""
    rows = []
    for c, returns in played:
        s, per_task = score(start, returns, tasks)
        rows.append({"name": c.name, "iteration": c.iteration, "score": s, "per_task": per_task})
    if not rows:
        raise ValueError("no checkpoint to choose from")
    best = max(range(len(rows)), key=lambda i: (rows[i]["score"], -i))
    return {"criterion": CRITERION, "candidates": rows, "chosen": rows[best]["name"],
            "chosen_iteration": rows[best]["iteration"]}


Play = Callable[[Path, str, list[int]], dict[tuple[str, int], float]]


def select_checkpoint(root: Path, sft: Path, rl: Path, iterations: int, tasks: Sequence[str], n: int,
                      play: Play) -> dict[str, Any]:
    """Play the SFT start and every candidate on the selection seeds (``play(checkpoint, name, seeds)``
    returns each (task, seed)'s return), choose, and write ``root/select.json``. Returns its record."""
    seeds = selection_seeds(n)
    start = play(sft, "sft", seeds)
    played = [(c, play(c.path, c.name, seeds)) for c in candidates(rl, iterations)]
    record = {"range": SELECT_RANGE, "seeds": [seeds[0], seeds[-1]], "tasks": list(tasks), **choose(start, played, tasks)}
    (root / SELECT_NAME).write_text(json.dumps(record, indent=2))
    return record


def load_selection(root: Path) -> dict[str, Any] | None:
    """A run directory's ``select.json``, or None when its RL checkpoint was not chosen by a select stage."""
    path = root / SELECT_NAME
    if not path.exists():
        return None
    try:
        return dict(json.loads(path.read_text()))
    except ValueError:
        return None


def selection_line(selection: dict[str, Any]) -> str:
    """One line for reports: which checkpoint the evidence's ``trained`` model is, and on what seeds."""
    lo, hi = selection["seeds"]
    others = ", ".join(f"{c['name']} {c['score']:+.2f}" for c in selection["candidates"])
    return (f"trained = {selection['chosen']} (after RL iteration {selection['chosen_iteration']}), chosen on "
            f"{selection['range']} seeds {lo:,}-{hi:,} by its worst task's paired t against the SFT start "
            f"({others})")


__all__ = ["CRITERION", "SELECT_NAME", "SELECT_RANGE", "Candidate", "candidates", "choose", "load_selection",
           "score", "select_checkpoint", "selection_line", "selection_seeds", "t_statistic"]
