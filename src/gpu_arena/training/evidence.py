"""Reading and rendering a pipeline's ``evidence.json`` (standard library only).

The file (written by :mod:`gpu_arena.training.pipeline`) holds the command, commit, seeds (the
holdout range evaluated and every fixed range, :mod:`gpu_arena.evaluation.ranges`), each stage's wall
time, the paired comparisons by holdout seed, the evaluation rows and, per task, each role's return
beside its deal rate, gain share and surplus over BATNA (:func:`per_task`). This module turns it into the tables
the CLI prints and the Markdown the docs show, so every number a reader sees comes from one file a
run wrote.

Why the deal rate, the gain share and the surplus sit beside the return: supervised imitation and
RL pull them apart (a policy can trade more often and keep less of each trade, or the reverse), so
a return alone hides which way a stage moved the model. The gain share is the seat's part of each
deal's joint gain (what the settlement did to its potential over what it did to both labs'), the
mean over every deal it settled; files from before it have none, and their tables print "-".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .selection import selection_line

REQUIRED = ("command", "commit", "seeds", "wall_s", "comparisons", "results")


class EvidenceError(ValueError):
    """Not an evidence file."""


def load_evidence(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise EvidenceError(f"{p}: cannot read evidence ({e})") from None
    missing = [k for k in REQUIRED if k not in data] if isinstance(data, dict) else list(REQUIRED)
    if missing:
        raise EvidenceError(f"{p}: not a pipeline evidence file (missing {', '.join(missing)})")
    return dict(data)


def verdict(c: dict[str, Any]) -> str:
    if c["ci_low"] > 0:
        return "better"
    if c["ci_high"] < 0:
        return "worse"
    return "no clear difference"


def difference_cells(c: dict[str, Any], *, sep: str = "/") -> tuple[str, str, str, str]:
    """A paired difference's ``n``, mean, 95% CI and wins/losses as text (``sep`` between wins and
    losses): the cells every comparison table prints, the evidence's and ``train compare``'s."""
    return (str(c["n"]), f"{c['mean_diff']:+.4f}", f"[{c['ci_low']:+.4f}, {c['ci_high']:+.4f}]",
            f"{c['wins']}{sep}{c['losses']}")


# what per_task keeps of each evaluation row (aggregate's names -> the evidence's)
PER_TASK = (("n", "n"), ("mean", "mean_return"), ("ci_low", "ci_low"), ("ci_high", "ci_high"),
            ("deal_rate", "deal_rate"), ("gain_share", "gain_share"), ("surplus_over_batna", "surplus_over_batna"),
            ("welfare_ratio", "welfare_ratio"), ("invalid_rate", "invalid_rate"))


def per_task(results: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """task -> role -> n, mean return with its 95% CI, deal rate, gain share (None: no deal), surplus
    over BATNA (the seat's money, unscaled), welfare ratio and invalid-action rate, from the
    evidence's evaluation rows."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        out.setdefault(str(r["task"]), {})[str(r.get("role", r["policy"]))] = {
            new: r[old] for old, new in PER_TASK if old in r}
    return out


def range_line(evidence: dict[str, Any]) -> str:
    """Which holdout seeds the evidence looked at, from which range (files from before the ranges
    name none: their seeds are the validation range's)."""
    seeds = evidence.get("seeds") or {}
    lo, hi = (seeds.get("holdout") or ["?", "?"])[:2]
    name = seeds.get("range", "validation")
    second = "; a second look at this range on this run (reopened)" if seeds.get("reopened") else ""
    return f"holdout seeds {lo}–{hi}, the {name} range{second}"


def comparison_rows(evidence: dict[str, Any]) -> list[tuple[str, ...]]:
    """(task, comparison, n, mean, CI, wins/losses) per comparison, as strings."""
    return [(c["task"], c["comparison"], *difference_cells(c)) for c in evidence["comparisons"]]


def markdown_report(evidence: dict[str, Any]) -> str:
    """Markdown: the command and the seeds looked at, the paired comparisons, a table per task (each
    role's return, deal rate, gain share, surplus over BATNA, welfare ratio and accepted turns),
    wall times."""
    valid = {(t.get("role"), t.get("task")): t for t in evidence.get("valid_turns", [])}
    lines = [f"`{evidence['command']}` (commit `{str(evidence['commit'])[:10]}`); {range_line(evidence)}", "",
             *([selection_line(evidence["selection"]), ""] if evidence.get("selection") else []),
             "| task | comparison | n | mean difference | 95% CI | wins / losses | verdict |",
             "|---|---|---|---|---|---|---|"]
    for c in evidence["comparisons"]:
        lines.append("| " + " | ".join((c["task"], c["comparison"], *difference_cells(c, sep=" / "), verdict(c))) + " |")
    # derived from the rows (not read from "per_task"), so files from before the table render the same way
    for task, roles in per_task(evidence["results"]).items():
        lines += ["", f"**{task}**", "",
                  "| policy | n | mean return | 95% CI | deal rate | gain share | surplus over BATNA | welfare ratio "
                  "| accepted turns |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for role, r in roles.items():
            t = valid.get((role, task))
            accepted = f"{t['valid_rate']:.3f} ({t['accepted']}/{t['turns']})" if t else "-"
            lines.append(f"| {role} | {r['n']} | {r['mean_return']:+.4f} | [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] | "
                         f"{_cell(r, 'deal_rate', '.3f')} | {_cell(r, 'gain_share', '.3f')} | "
                         f"{_cell(r, 'surplus_over_batna', '+.2f')} | "
                         f"{_cell(r, 'welfare_ratio', '.3f')} | {accepted} |")
    wall = evidence["wall_s"]
    lines += ["", "| stage | wall time |", "|---|---|"]
    lines += [f"| {stage} | {seconds:,.0f} s |" for stage, seconds in wall.items()]
    lines.append(f"| total | {sum(wall.values()):,.0f} s |")
    return "\n".join(lines)


def _cell(row: dict[str, Any], key: str, spec: str) -> str:
    value = row.get(key)
    return "-" if value is None else format(float(value), spec)


__all__ = ["EvidenceError", "comparison_rows", "difference_cells", "load_evidence", "markdown_report", "per_task",
           "range_line", "verdict"]
