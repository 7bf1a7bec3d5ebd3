"""The CLI's tables read in an ordinary 80-column terminal: no line wider than the terminal and no
cell cut to an ellipsis, by default; ``--wide`` adds the columns left out."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app
from gpu_arena.training.runlog import connect, finish_run, start_run

ROOT = Path(__file__).resolve().parents[2]
NARROW = {"COLUMNS": "80", "NO_COLOR": "1"}


def _fits(output: str) -> None:
    lines = output.splitlines()
    assert lines, "no output"
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert "…" not in output


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    db = tmp_path / "arena.db"
    con = connect(db)
    for kind in ("sft", "rft", "pipeline"):
        run = start_run(con, kind=kind, config={}, preset="small", model="a/long/checkpoint/directory/name/sft",
                        output_dir=str(tmp_path / "runs" / f"{kind}-with-a-long-directory-name"))
        finish_run(con, run, status="finished", duration_s=123.4, summary={"train_loss": 0.5})
    return db


def test_runs_fit_80_columns_and_wide_adds_the_rest(store: Path) -> None:
    runner = CliRunner()
    narrow = runner.invoke(app, ["runs", "--db", str(store)], env=NARROW)
    assert narrow.exit_code == 0, narrow.output
    _fits(narrow.output)
    assert "pipeline" in narrow.output and "output" not in narrow.output
    wide = runner.invoke(app, ["runs", "--db", str(store), "--wide"], env={**NARROW, "COLUMNS": "250"})
    assert wide.exit_code == 0, wide.output
    assert "output" in wide.output and "created" in wide.output, wide.output


def test_the_evidence_tables_fit_80_columns() -> None:
    res = CliRunner().invoke(app, ["train", "evidence", str(ROOT / "docs" / "learning-evidence.json")], env=NARROW)
    assert res.exit_code == 0, res.output
    _fits(res.output)
    assert "trained-vs-no_negotiation" in res.output and "single_trade holdout" in res.output


def test_turn_counts_fit_80_columns(tmp_path: Path) -> None:
    replays = tmp_path / "replays.jsonl"
    runner = CliRunner()
    res = runner.invoke(app, ["eval", "--policies", "random_valid,no_negotiation", "--tasks", "single_trade",
                              "--seeds", "2", "--db", str(tmp_path / "e.db"), "--out", str(tmp_path / "r.json"),
                              "--replays", str(replays)], env=NARROW)
    assert res.exit_code == 0, res.output
    turns = runner.invoke(app, ["runs", "turns", str(replays)], env=NARROW)
    assert turns.exit_code == 0, turns.output
    _fits(turns.output)
    assert "random_valid" in turns.output and "codes" not in turns.output
