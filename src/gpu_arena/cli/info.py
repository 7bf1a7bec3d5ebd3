"""``gpu-arena tasks``, ``schema``, ``policies`` and ``info``: what the arena offers, listed."""

from __future__ import annotations

import json

import typer
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


def info(as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table")) -> None:
    """Which engine plays here and why: the Rust build, what it was made from, the Python core."""
    import platform
    from importlib.metadata import version
    from types import ModuleType

    from ..native import loader
    from ..native.twin import native_engine

    engine = native_engine()
    module = loader.installed()
    facts: dict[str, str] = {
        "gpu-arena": version("gpu-arena"),
        "python": platform.python_version(),
        "engine (auto)": "rust" if isinstance(engine, ModuleType) else f"python: {engine}",
        "rust build": (getattr(module, "__file__", None) or "built in") if isinstance(module, ModuleType) else module,
    }
    if isinstance(module, ModuleType):
        record = loader.build_record(module)
        facts["built from crate"] = record["sha256"][:16] or "unknown (not the package's build)"
    crate = loader.crate_dir()
    facts["crate"] = f"native/ ({loader.crate_digest(crate)[:16]})" if crate is not None else "none (an installed package)"
    if as_json:
        print(json.dumps(facts, indent=1))
        return
    table = Table(title="gpu-arena", show_header=False)
    table.add_column("what")
    table.add_column("", overflow="fold")
    for key, value in facts.items():
        table.add_row(key, value)
    console.print(table)
