"""Turn-level statistics of recorded episodes: how often a seat's action was accepted, and how often
the model's output could not be read at all (format errors, by code).

The evaluation table's ``invalid_rate`` counts actions the rules refused *and* unreadable output
together (same-round conflicts excepted); this splits them, from the replays that
``gpu-arena eval --replays`` writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def _records(source: str | Path | Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    if isinstance(source, str | Path):
        from ..evaluation.replay import read_jsonl

        return read_jsonl(str(source))
    return source


def turn_stats(source: str | Path | Iterable[dict[str, Any]], seat: str = "lab_0") -> list[dict[str, Any]]:
    """Per (policy, task, split): ``episodes``, ``turns`` (rounds the seat acted in), ``accepted``
    (its action went through), ``valid_rate`` = accepted / turns, ``format_errors`` (unreadable
    output: ``rejected`` codes starting ``format_``), ``format_error_rate``, ``rule_errors`` (the
    rules refused a readable action, conflicts included) and ``codes`` (every refusal code, counted)."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for rec in _records(source):
        key = (str(rec.get("policy")), str(rec.get("task")), str(rec.get("split")))
        g = groups.setdefault(key, {"episodes": 0, "turns": 0, "accepted": 0, "format_errors": 0,
                                    "rule_errors": 0, "codes": Counter()})
        g["episodes"] += 1
        for rnd in rec.get("transcript") or []:
            action = (rnd.get("actions") or {}).get(seat)
            if action is None:
                continue  # a finished seat waits without acting
            g["turns"] += 1
            ok, code = (rnd.get("results") or {}).get(seat, [True, "ok"])
            rejected = action.get("rejected")
            if ok:
                g["accepted"] += 1
            elif isinstance(rejected, str) and rejected.startswith("format_"):
                g["format_errors"] += 1
                g["codes"][rejected] += 1
            else:
                g["rule_errors"] += 1
                g["codes"][str(code)] += 1
    rows = []
    for (policy, task, split), g in groups.items():
        n = max(g["turns"], 1)
        rows.append({"policy": policy, "task": task, "split": split, **g, "codes": dict(g["codes"]),
                     "valid_rate": g["accepted"] / n, "format_error_rate": g["format_errors"] / n})
    return rows


__all__ = ["turn_stats"]
