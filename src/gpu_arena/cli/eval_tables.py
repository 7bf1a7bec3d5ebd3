"""The tables `gpu-arena eval` prints beside its results (80 columns; ``--wide`` for every column)."""

from __future__ import annotations

from typing import Any

from .console import FitTable


def print_usage(rows: list[dict[str, object]], wide: bool = False) -> None:
    """The LLM ledgers of an evaluation: calls, tokens and time per call, per policy and role (each
    header's words stacked, so that they read whole at 80 columns; the title says they are per call)."""
    table = FitTable("LLM ledgers (summed over episodes; tokens and times per call)",
                     ("policy", "task", "role", "agent", "calls", "prompt tokens", "reply tokens", "model seconds",
                      "overhead ms", "format errors", "failures"),
                     wide_only=("task", "agent", "overhead ms", "failures"),
                     numeric=("calls", "prompt tokens", "reply tokens", "model seconds", "overhead ms", "format errors",
                              "failures"), whole=("role",), wide=wide, stack_headers=True)
    for r in rows:
        table.add_row(str(r["policy"]), str(r["task"]), str(r["role"]), str(r["agent"])[:48], str(r["calls"]),
                      f"{r['prompt_tokens_per_call']:.0f}", f"{r['completion_tokens_per_call']:.0f}",
                      f"{r['model_s_per_call']:.2f}", f"{r['overhead_ms_per_call']:.1f}", str(r["format_errors"]),
                      str(r["failures"]))
    table.print()


def print_seat_returns(results: list[Any]) -> None:
    """Self-play: each seat's mean return per policy and task (every seat is the policy itself)."""
    from ..evaluation.stats import bootstrap_ci

    table = FitTable("Self-play: every seat's return (mean, 95% CI)", ("policy", "task", "seat", "mean", "95% CI", "n"),
                     numeric=("mean", "95% CI", "n"), whole=("seat",))
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in results:
        for seat, value in sorted((r.seat_returns or {}).items()):
            groups.setdefault((r.policy, r.task, seat), []).append(value)
    for (policy, task, seat), values in groups.items():
        low, high = bootstrap_ci(values)
        table.add_row(policy, task, seat, f"{sum(values) / len(values):+.4f}", f"[{low:+.4f}, {high:+.4f}]",
                      str(len(values)))
    table.print()


def print_engines(results: list[Any]) -> None:
    """Which engine played the evaluation's episodes, and why the Python core played the others:
    ``engine: rust (1188 episodes), python (12: policy bound to the world 12)``, wrapped at 80
    columns (the reasons are :mod:`gpu_arena.native.report`'s)."""
    import textwrap

    from ..native.report import engine_counts, engine_line

    line = engine_line(engine_counts((r.engine, r.engine_reason) for r in results))
    print(textwrap.fill(line, width=80, subsequent_indent="  ", break_long_words=False))
