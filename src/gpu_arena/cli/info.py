"""``gpu-arena tasks``, ``schema`` and ``policies``: what the arena offers, listed."""

from __future__ import annotations

import json

from rich.table import Table

from ..core.tasks import task_params
from ..core.types import ACTION_TYPES, REWARD_COLUMNS, TASKS
from .console import console


def tasks() -> None:
    """List the tasks with their sizes per split."""
    table = Table(title="tasks")
    for col in ("task", "split", "labs", "rounds", "jobs/lab", "blocks/lab", "shocks"):
        table.add_column(col)
    for t in TASKS:
        for s in ("train", "holdout"):
            p = task_params(t, s)
            table.add_row(t, s, *(f"{lo}-{hi}" for lo, hi in (p.n_labs, p.rounds, p.jobs_per_lab,
                                                               p.blocks_per_lab, p.n_shocks)))
    console.print(table)


def schema() -> None:
    """Print the action types, reward columns and the action JSON schema."""
    from ..models import ArenaAction

    print(json.dumps({"action_types": list(ACTION_TYPES), "reward_columns": list(REWARD_COLUMNS),
                      "action_schema": ArenaAction.model_json_schema()}, indent=2))


def policies() -> None:
    """List the registered policies (and name families such as llm:openai:<model>@<base_url>)."""
    from ..policies import policy_families, policy_names

    for name in policy_names():
        console.print(name)
    for prefix in policy_families():
        console.print(f"{prefix}:...", markup=False)
