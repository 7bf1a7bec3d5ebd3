"""The README's per-task table is the documented evidence file's numbers, not a copy that can drift:
every row of the test-range table is read back from ``docs/learning-evidence-tasks.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _cell(c: dict[str, Any]) -> str:
    # the README writes minus signs as U+2212
    return f"{c['mean_diff']:+.4f} [{c['ci_low']:+.4f}, {c['ci_high']:+.4f}]".replace("-", "\u2212")


def test_the_readme_task_table_is_the_evidence_files() -> None:
    evidence = json.loads((ROOT / "docs" / "learning-evidence-tasks.json").read_text())
    assert evidence["seeds"]["range"] == "test" and not evidence["seeds"]["reopened"]
    readme = (ROOT / "README.md").read_text().splitlines()
    by = {(c["task"], c["comparison"]): c for c in evidence["comparisons"]}
    tasks = evidence["tasks"]
    assert len(tasks) == 3
    for task in tasks:
        rows = [line for line in readme if line.startswith(f"| `{task}` |") and "\u2192" in line]
        assert len(rows) == 1, (task, rows)
        cells = [x.strip() for x in rows[0].strip("|").split("|")]
        assert cells[1] == _cell(by[(task, "trained-vs-no_negotiation")])
        assert cells[2] == _cell(by[(task, "trained-vs-sft")])
        roles = evidence["per_task"][task]
        assert cells[3] == f"{roles['sft']['deal_rate']:.3f} \u2192 {roles['trained']['deal_rate']:.3f}"
        assert cells[4] == f"{roles['sft']['gain_share']:.3f} \u2192 {roles['trained']['gain_share']:.3f}"
