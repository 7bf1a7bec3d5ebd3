"""Reading and rendering a pipeline's ``evidence.json`` (standard library only).

The file (written by :mod:`gpu_arena.training.pipeline`) holds the command, commit, seeds, each
stage's wall time, the paired comparisons by holdout seed and the evaluation rows. This module
turns it into the tables the CLI prints and the Markdown the docs show, so every number a reader
sees comes from one file a run wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def comparison_rows(evidence: dict[str, Any]) -> list[tuple[str, ...]]:
    """(task, comparison, n, mean, CI, wins/losses) per comparison, as strings."""
    return [(c["task"], c["comparison"], *difference_cells(c)) for c in evidence["comparisons"]]


def markdown_report(evidence: dict[str, Any]) -> str:
    """Markdown: the command, the paired comparisons, the holdout rows with accepted turns, wall times."""
    valid = {(t.get("role"), t.get("task")): t for t in evidence.get("valid_turns", [])}
    lines = [f"`{evidence['command']}` (commit `{str(evidence['commit'])[:10]}`)", "",
             "| task | comparison | n | mean difference | 95% CI | wins / losses | verdict |",
             "|---|---|---|---|---|---|---|"]
    for c in evidence["comparisons"]:
        lines.append("| " + " | ".join((c["task"], c["comparison"], *difference_cells(c, sep=" / "), verdict(c))) + " |")
    lines += ["", "| policy | task | n | mean return | 95% CI | accepted turns |", "|---|---|---|---|---|---|"]
    for r in evidence["results"]:
        t = valid.get((r.get("role"), r["task"]))
        accepted = f"{t['valid_rate']:.3f} ({t['accepted']}/{t['turns']})" if t else "-"
        lines.append(f"| {r.get('role', r['policy'])} | {r['task']} | {r['n']} | {r['mean']:+.4f} | "
                     f"[{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] | {accepted} |")
    wall = evidence["wall_s"]
    lines += ["", "| stage | wall time |", "|---|---|"]
    lines += [f"| {stage} | {seconds:,.0f} s |" for stage, seconds in wall.items()]
    lines.append(f"| total | {sum(wall.values()):,.0f} s |")
    return "\n".join(lines)


__all__ = ["EvidenceError", "comparison_rows", "difference_cells", "load_evidence", "markdown_report", "verdict"]
