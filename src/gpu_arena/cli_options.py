"""Option values the CLI's commands read the same way: comma-separated lists, task lists, and how
many seeds one command may ask for. Each refusal is a usage error (``typer.BadParameter``, exit
status 2) naming the option, raised before the command does any work."""

from __future__ import annotations

import typer

from .core.types import TASKS

MAX_SEEDS = 1_000_000  # worlds or episodes one option may ask for (each is a seed held in memory)


def split_list(value: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``."""
    return [x.strip() for x in value.split(",") if x.strip()]


def task_list(value: str, option: str) -> tuple[str, ...]:
    """The tasks ``option`` names: at least one, each a task of the arena."""
    tasks = tuple(split_list(value))
    if not tasks:
        raise typer.BadParameter(f"{option} names no task; expected some of {', '.join(TASKS)}")
    for t in tasks:
        if t not in TASKS:
            raise typer.BadParameter(f"{option}: unknown task {t!r}; expected one of {', '.join(TASKS)}")
    return tasks
