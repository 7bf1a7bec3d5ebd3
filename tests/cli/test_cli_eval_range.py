"""`gpu-arena eval --range`: a named holdout range (gpu_arena.evaluation.ranges) instead of a seed
start, recorded with the run, its command repeating it; seed options that would leave the range are
usage errors."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app
from gpu_arena.cli.evaluate import eval_command_line

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def test_eval_plays_the_named_range_and_its_command_repeats_it(tmp_path: Path) -> None:
    out, db = tmp_path / "r.json", str(tmp_path / "e.db")
    base = ["eval", "--policies", "no_negotiation", "--tasks", "single_trade", "--seeds", "2", "--db", db]
    res = CliRunner().invoke(app, [*base, "--range", "test", "--out", str(out)], env=ENV)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["results"][0]["seeds"] == [10_000, 10_001]
    assert data["args"]["range"] == "test" and data["args"]["seed_start"] == 10_000
    again = tmp_path / "again.json"
    cmd = [*shlex.split(eval_command_line({**data["args"], "db": db}))[1:], "--out", str(again)]
    res = CliRunner().invoke(app, cmd, env=ENV)
    assert res.exit_code == 0, res.output
    assert json.loads(again.read_text())["results"][0]["seeds"] == [10_000, 10_001]


@pytest.mark.parametrize(("extra", "says"), [
    (["--range", "future"], "unknown holdout range 'future'"),
    (["--range", "test", "--split", "train"], "use --split holdout"),
    (["--range", "check", "--seed-start", "5"], "starts at seed 20,000"),
    (["--range", "validation", "--seeds", "10001"], "holds 10,000 seeds"),
])
def test_eval_refuses_seed_options_that_leave_the_range(tmp_path: Path, extra: list[str], says: str) -> None:
    res = CliRunner().invoke(app, ["eval", "--policies", "no_negotiation", "--tasks", "single_trade",
                                   "--db", str(tmp_path / "e.db"), "--out", str(tmp_path / "r.json"), *extra], env=ENV)
    assert res.exit_code == 2, res.output
    assert says in " ".join(re.sub(r"[│╭╮╰╯─]", " ", res.output).split())
    assert not (tmp_path / "e.db").exists()
