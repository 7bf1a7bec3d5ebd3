"""Option values the CLI's commands read the same way: comma-separated lists, task lists, and how
many seeds one command may ask for. Each refusal is a usage error (``typer.BadParameter``, exit
status 2) naming the option, raised before the command does any work."""

from __future__ import annotations

import re

import typer

from ..core.types import TASKS

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


def seat_spec(value: str) -> str | list[str] | dict[str, str]:
    """``name`` for every other seat, ``a,b,c`` in seat order, or ``lab_1=name,lab_2=name``."""
    items = split_list(value)
    # a seat=policy pair starts with a seat id; an LLM name's options (?mode=json) also hold '='
    if any(re.match(r"lab_\d+=", x) for x in items):
        pairs = [x.split("=", 1) for x in items]
        if any(len(p) != 2 or not p[0] or not p[1] for p in pairs):
            raise typer.BadParameter(f"expected seat=policy pairs, got {value!r}")
        return {k.strip(): v.strip() for k, v in pairs}
    return items if len(items) > 1 else (items[0] if items else "archetypes")

