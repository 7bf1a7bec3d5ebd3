"""``gpu-arena runs``: the training runs in the results store, one run's metrics, and the seat's
turns and moves in recorded episodes."""

from __future__ import annotations

import json
from typing import Any

import typer

from .console import FitTable, console
from .train_checks import fail

runs_app = typer.Typer(add_completion=False, invoke_without_command=True,
                       help="Training runs in the results store (no subcommand: list them).")


def _fmt(v: Any, spec: str = "+.4f") -> str:
    return "-" if not isinstance(v, int | float) else format(v, spec)


@runs_app.callback()
def runs_main(
    ctx: typer.Context,
    kind: str | None = typer.Option(None, help="sft | grpo"),
    limit: int = typer.Option(30, min=1, help="newest N runs"),
    db: str | None = typer.Option(None, help="SQLite store (default .arena/arena.db or $GPU_ARENA_DB)"),
    as_json: bool = typer.Option(False, "--json", help="print the runs as JSON"),
    wide: bool = typer.Option(False, "--wide", help="every column (created, model, tokens/s, output)"),
) -> None:
    """List training runs (newest first) from the store."""
    if ctx.invoked_subcommand is not None:
        return
    from ..training.runlog import connect, list_training_runs

    runs = list_training_runs(connect(db), kind=kind, limit=limit)
    if as_json:
        print(json.dumps(runs, indent=2, default=str))
        return
    table = FitTable("training runs (newest first)",
                     ("id", "kind", "status", "created", "preset", "model", "steps", "loss", "reward", "valid",
                      "tok/s", "time", "output"),
                     wide_only=("created", "model", "tok/s", "output"), whole=("kind", "status", "preset"),
                     numeric=("id", "steps", "loss", "reward", "valid", "tok/s", "time"), wide=wide)
    for r in runs:
        final = (r["summary"] or {}).get("final") or {}
        table.add_row(str(r["id"]), r["kind"], r["status"], str(r["created_at"]), str(r["preset"]), str(r["model"]),
                      str(r["last_step"] if r["last_step"] is not None else "-"),
                      _fmt((r["summary"] or {}).get("train_loss"), ".4f"), _fmt(final.get("reward")),
                      _fmt(final.get("arena/valid_action_rate"), ".2f"), _fmt(final.get("tokens_per_s"), ".0f"),
                      f"{r['duration_s']:.0f} s" if r["duration_s"] else "-", str(r["output_dir"]))
    table.print()


@runs_app.command("show")
def runs_show(
    run_id: int = typer.Argument(..., help="training run id"),
    db: str | None = typer.Option(None, help="SQLite store"),
    as_json: bool = typer.Option(False, "--json", help="print the run and its metric series as JSON"),
) -> None:
    """One run: its config and, per metric, the first, last, min and max logged value."""
    from ..training.runlog import connect, load_training_run

    run = load_training_run(connect(db), run_id)
    if run is None:
        raise typer.BadParameter(f"no training run {run_id} in the store")
    if as_json:
        print(json.dumps(run, indent=2, default=str))
        return
    console.print(f"[bold]run {run['id']}[/bold] {run['kind']} ({run['status']}), preset {run['preset']}, model "
                  f"{run['model']}, commit {str(run['git_commit'])[:8]}, output {run['output_dir']}")
    table = FitTable("metrics", ("metric", "logs", "first", "last", "min", "max"),
                     numeric=("logs", "first", "last", "min", "max"), whole=("metric",))
    for name, s in sorted(run["series"].items()):
        v = s["value"]
        table.add_row(name, str(len(v)), *(_fmt(x, ".4g") for x in (v[0], v[-1], min(v), max(v))))
    table.print()


@runs_app.command("turns")
def runs_turns(
    replays: str = typer.Argument(..., help="replay JSONL from `gpu-arena eval --replays`"),
    seat: str = typer.Option("lab_0", help="the seat to count"),
    wide: bool = typer.Option(False, "--wide", help="every column (split, refusals by code)"),
) -> None:
    """Per policy: the seat's turns, the share the rules accepted, and format errors (unreadable
    model output) by code, from recorded episodes."""
    from ..training.evaluate import turn_stats

    try:
        rows = turn_stats(replays, seat=seat)
    except (OSError, ValueError) as e:
        raise fail(e) from None
    table = FitTable(f"turns of {seat} (valid: share the rules accepted; unreadable: format errors)",
                     ("policy", "task", "split", "episodes", "turns", "valid", "unreadable", "refused", "codes"),
                     wide_only=("split", "codes"), numeric=("episodes", "turns", "valid", "unreadable", "refused"),
                     whole=("task",), wide=wide)
    for r in rows:
        table.add_row(r["policy"], r["task"], r["split"], str(r["episodes"]), str(r["turns"]),
                      f"{r['valid_rate']:.3f}", str(r["format_errors"]), str(r["rule_errors"]),
                      ", ".join(f"{k} {v}" for k, v in sorted(r["codes"].items())))
    table.print()


@runs_app.command("moves")
def runs_moves(
    replays: str = typer.Argument(..., help="replay JSONL from `gpu-arena eval --replays`"),
    seat: str = typer.Option("lab_0", help="the seat to read"),
    task: str | None = typer.Option(None, help="read only this task's episodes"),
    wide: bool = typer.Option(False, "--wide", help="every column (the seat's turns, mean return, and the "
                                                    "repeated offers sent while the same offer was open)"),
) -> None:
    """Per policy and task: the seat's allocations on due turns by their form (short: the whole plan;
    line: the blocks the prompt's allocation line names; other: other named blocks; job: to a named
    job), due turns that left a block idle, and moves made again unchanged (spam)."""
    from ..training.moves import move_stats

    try:
        rows = move_stats(replays, seat=seat, task=task)
    except (OSError, ValueError) as e:
        raise fail(e) from None
    numeric = ("turns", "return", "due", "short", "line", "other", "job", "missed", "repeated", "still open")
    for name in dict.fromkeys(r["task"] for r in rows):  # one table a task: the policy names are long
        table = FitTable(f"{name}: {seat}'s moves on due turns (its plan's blocks open next round)",
                         ("policy", *numeric), wide_only=("turns", "return", "still open"), numeric=numeric, wide=wide)
        for r in (r for r in rows if r["task"] == name):
            f = r["forms"]
            table.add_row(r["policy"], str(r["turns"]), f"{r['reward']:+.4f}", str(r["due_turns"]),
                          *(str(f[k]) for k in ("short", "line", "other_named", "job")), str(r["due_missed"]),
                          str(sum(r["repeated"].values())), str(r["repeated_open"]))
        table.print()


__all__ = ["runs_app"]
