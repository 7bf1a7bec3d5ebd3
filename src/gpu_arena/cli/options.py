"""Option values the CLI's commands read the same way: comma-separated lists, task lists, and how
many seeds one command may ask for. Each refusal is a usage error (``typer.BadParameter``, exit
status 2) naming the option, raised before the command does any work."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from ..core.types import TASKS

if TYPE_CHECKING:
    from ..core.opponents import OpponentsSpec

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


def judge_options(judge_mode: str, judge: str | None) -> tuple[str, str | None]:
    """``--judge`` turns judge mode on; ``rule`` (or nothing) means the rule judge alone."""
    if judge_mode not in ("none", "rule"):
        raise typer.BadParameter(f"--judge-mode must be none or rule, got {judge_mode!r}")
    if judge in (None, "", "rule"):
        return judge_mode, None
    if not judge.startswith("llm:"):
        raise typer.BadParameter(f"unknown judge {judge!r}; expected rule or llm:openai:<model>@<base_url>")
    return "rule", judge


def opponents_spec(value: str) -> OpponentsSpec:
    """``--opponents``: one policy for every other seat, ``a,b,c`` in seat order, or
    ``lab_1=name,lab_2=name`` (see :class:`~gpu_arena.core.opponents.OpponentsSpec`)."""
    from ..core.opponents import OpponentsError, OpponentsSpec

    try:
        return OpponentsSpec.parse(value)
    except OpponentsError as e:
        raise typer.BadParameter(str(e)) from None
