"""What `gpu-arena eval` shows a user: no third-party progress bars while local models load, policy
names as typed (never HTML-escaped, never read as markup), and an LLM ledger whose headers read
whole at 80 columns."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_arena.cli.console import QUIET_ENV, console, quiet_libraries
from gpu_arena.cli.eval_tables import print_usage
from gpu_arena.evaluation.report import markdown_table, paired_table

NAME = "llm:hf:models/a&b?max_tokens=8&mode=json"
LEDGER_WORDS = ("policy", "role", "calls", "prompt", "reply", "tokens", "model", "seconds", "format", "errors")


def _ledger_row(policy: str, role: str = "controlled") -> dict[str, Any]:
    return {"policy": policy, "task": "single_trade", "role": role, "agent": "TransformersAgent", "calls": 6,
            "prompt_tokens_per_call": 1440.0, "completion_tokens_per_call": 2.0, "model_s_per_call": 1.61,
            "overhead_ms_per_call": 3.2, "format_errors": 0, "failures": 0}


def _ledger_lines(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("LLM ledgers"))
    end = next((i for i in range(start + 1, len(lines)) if " episodes in " in lines[i]), len(lines))
    return lines[start:end]


def _check_ledger(lines: list[str], policy: str) -> None:
    assert lines and max(len(line) for line in lines) <= 80, max(lines, key=len)
    text = "\n".join(lines)
    assert "…" not in text
    rule = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"})
    header_words = set(" ".join(lines[:rule]).split())
    assert set(LEDGER_WORDS) <= header_words, sorted(set(LEDGER_WORDS) - header_words)
    assert "controlled" in text  # the role whole ("controll" before)
    assert "".join(line.split("   ")[0].strip() for line in lines[rule + 1:]).startswith(policy)  # folded, whole


def test_the_ledger_headers_read_whole_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    with console.capture() as captured:
        print_usage([_ledger_row(NAME), _ledger_row("s[bold]x", "opponent")])
    lines = captured.get().splitlines()
    _check_ledger(lines[:lines.index(next(line for line in lines if "s[bold]x" in line))], NAME)
    assert "s[bold]x" in captured.get()  # a name is text, not markup
    assert "&amp;" not in captured.get()


def test_wide_adds_the_ledgers_other_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with console.capture() as captured:
        print_usage([_ledger_row(NAME)], wide=True)
    words = set(captured.get().split())
    assert {"task", "agent", "overhead", "ms", "failures", "single_trade"} <= words


def test_a_terminal_table_shows_names_as_typed_and_a_file_escapes_them() -> None:
    row = {"task": "single_trade", "split": "holdout", "policy": NAME, "n": 2, "mean": 0.1, "ci_low": 0.0,
           "ci_high": 0.2, "welfare_ratio": 0.5, "surplus_over_batna": 1.0, "deal_rate": 0.5, "breach_rate": 0.0,
           "invalid_rate": 0.0}
    pair = {"task": "single_trade", "split": "holdout", "policy": NAME, "versus": "x<y>|z", "n": 2,
            "mean_diff": 0.1, "ci_low": 0.0, "ci_high": 0.2, "wins": 1, "losses": 0}
    assert f"| {NAME} |" in markdown_table([row], escape_html=False)
    assert f"{NAME} − x<y>\\|z |" in paired_table([pair], escape_html=False)  # | still cannot split a cell
    assert "a&amp;b" in markdown_table([row]) and "x&lt;y&gt;\\|z" in paired_table([pair])  # for report.md


def test_quiet_libraries_sets_the_workers_environment_and_puts_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    for name in QUIET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")  # the user's own setting is kept
    with quiet_libraries(models=False):
        assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ  # scripted policies: nothing to hide
    with quiet_libraries(models=True):
        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
        assert os.environ["TRANSFORMERS_VERBOSITY"] == "info"
        from transformers.utils import logging

        assert not logging.is_progress_bar_enabled()
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ and os.environ["TRANSFORMERS_VERBOSITY"] == "info"
    assert logging.is_progress_bar_enabled()
    with quiet_libraries(models=True, verbose=True):
        assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ


def test_eval_of_a_local_model_prints_no_progress_bars_and_names_as_typed(tmp_path: Path) -> None:
    """The command as a user runs it, in an 80-column terminal, with two worker processes (each loads
    the model): stdout and stderr of every process."""
    pytest.importorskip("transformers")
    from gpu_arena.llm.testing import build_tiny_model

    model = build_tiny_model(tmp_path / "a&b", script='{"action_type": "allocate_to_job"}')
    policy = f"llm:hf:{model}?max_tokens=8&mode=json"
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}
    for name in (*QUIET_ENV, "GPU_ARENA_DB"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "gpu_arena.cli", "eval", "--policies", f"{policy},no_negotiation",
                           "--tasks", "single_trade", "--seeds", "2", "--workers", "2", "--db", str(tmp_path / "e.db"),
                           "--out", str(tmp_path / "r.json")], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600, check=False)
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    assert "Loading weights" not in shown and not re.search(r"\d+it/s|it/s\]", shown), shown
    assert "&amp;" not in shown
    assert f"| {policy} |" in done.stdout and f"against {policy} (" in done.stdout
    _check_ledger(_ledger_lines(done.stdout), policy)


def test_play_with_a_local_model_prints_no_progress_bars(tmp_path: Path) -> None:
    """`gpu-arena play` with an llm:hf: seat: its weights load when the seat first moves, between the
    round tables; no "Loading weights" bar may cut into them (--verbose shows them)."""
    pytest.importorskip("transformers")
    from gpu_arena.llm.testing import build_tiny_model

    model = build_tiny_model(tmp_path / "m", script='{"action_type": "allocate_to_job"}')
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}
    for name in QUIET_ENV:
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "gpu_arena.cli", "play", "--task", "single_trade", "--seed", "3",
                           "--me", f"llm:hf:{model}?max_tokens=8&mode=json"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=600, check=False)
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    assert "round 0" in done.stdout and "LLM ledgers" in done.stdout
    assert "Loading weights" not in shown and not re.search(r"\d+it/s|it/s\]", shown), shown
