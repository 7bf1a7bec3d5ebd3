"""Bad option values and unreadable files are usage errors (exit 2, a message naming what is wrong),
never a traceback, and they are found before any work is done."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _usage_error(args: list[str], says: str) -> None:
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit)  # typer's usage error, not an escaped exception
    assert says in " ".join(result.output.split()), result.output


@pytest.mark.parametrize(("extra", "says"), [
    (["--policies", ""], "names no policy"),
    (["--policies", " , "], "names no policy"),
    (["--tasks", ""], "names no task"),
    (["--seed-start", str(2**70)], "seed-start"),
    (["--seeds", "0"], "seeds"),
])
def test_eval_refuses_empty_lists_and_out_of_range_seeds(tmp_path: Path, extra: list[str], says: str) -> None:
    _usage_error(["eval", "--seeds", "1", "--tasks", "single_trade", "--policies", "wait",
                  "--db", str(tmp_path / "a.db"), "--out", str(tmp_path / "o.json"), *extra], says)


def test_eval_finds_an_unwritable_output_before_running(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _usage_error(["eval", "--seeds", "1", "--tasks", "single_trade", "--policies", "wait",
                  "--db", str(tmp_path / "a.db"), "--out", str(blocker / "o.json")], "cannot write")
    assert not (tmp_path / "a.db").exists()  # nothing ran, nothing was stored


def test_eval_makes_the_output_folder(tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir" / "o.json"
    result = CliRunner().invoke(app, ["eval", "--seeds", "1", "--tasks", "single_trade", "--policies", "wait",
                                      "--workers", "1", "--db", str(tmp_path / "a.db"), "--out", str(out)], env=ENV)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["results"]


@pytest.mark.parametrize(("content", "says"), [
    (None, "cannot read"),
    ("not json at all\n", "is not a replay JSONL file"),
    ("[" * 5000 + "]" * 5000 + "\n", "is not a replay JSONL file"),
    ("42\n", "lacks policy"),
    ('{"policy": "wait", "task": "single_trade"}\n', "lacks split, seed, transcript"),
    ('{"policy": "wait", "task": "single_trade", "split": "train", "seed": 1, "transcript": [{"round": 0}]}\n',
     "is not a readable replay"),
])
def test_replay_refuses_what_is_not_a_replay(tmp_path: Path, content: str | None, says: str) -> None:
    path = tmp_path / "r.jsonl"
    if content is not None:
        path.write_text(content)
    _usage_error(["replay", str(path)], says)


def test_serve_refuses_an_unknown_log_level_before_it_starts() -> None:
    _usage_error(["serve", "--log-level", "nope", "--port", "0"], "--log-level must be one of")


def test_an_unreachable_model_is_one_line_and_exit_1(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_arena.cli import main

    # port 9 on loopback: nothing listens, the connection is refused at once (after the agent's retries)
    monkeypatch.setattr("sys.argv", ["gpu-arena", "demo", "--policy", "llm:openai:m@http://127.0.0.1:9"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "a language model could not be reached" in out and "Traceback" not in out


@pytest.mark.parametrize("args", [["runs"], ["report"], ["league", "show"]])
def test_a_store_that_is_not_a_database_is_one_line_and_exit_1(tmp_path: Path, args: list[str],
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from gpu_arena.cli import main

    db = tmp_path / "notes.txt"
    db.write_text("not a database, just some notes\n" * 100)
    monkeypatch.setattr("sys.argv", ["gpu-arena", *args, "--db", str(db)])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "cannot be used as the store" in out and "Traceback" not in out


@pytest.mark.parametrize(("args", "says"), [
    (["report", "--run", str(2**70)], f"no evaluation run {2**70}"),
    (["league", "run", "--entrants", "wait,random_valid", "--seed", str(2**70)], "--seed"),
    (["league", "run", "--entrants", "wait,random_valid", "--matches", str(10**9)], "--matches"),
])
def test_numbers_past_the_store_are_usage_errors(tmp_path: Path, args: list[str], says: str) -> None:
    _usage_error([*args, "--db", str(tmp_path / "a.db")], says)


def test_report_finds_unwritable_places_before_writing(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    made = CliRunner().invoke(app, ["eval", "--seeds", "1", "--tasks", "single_trade", "--policies", "wait",
                                    "--workers", "1", "--db", db, "--out", str(tmp_path / "o.json")], env=ENV)
    assert made.exit_code == 0, made.output
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _usage_error(["report", "--db", db, "--out-dir", str(blocker / "reports")], "cannot write")
    _usage_error(["report", "--db", db, "--out-dir", str(tmp_path / "r"), "--to", str(tmp_path)], "cannot write")
    assert not (tmp_path / "r" / "report.md").exists()


def test_runs_turns_refuses_lines_that_are_not_replays(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('[1, 2]\n{"policy": "wait", "transcript": [[]]}\n')
    _usage_error(["runs", "turns", str(path)], "record 0 is not an episode replay")


def test_a_store_row_changed_by_hand_is_one_line_and_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    from gpu_arena.cli import main

    db = str(tmp_path / "a.db")
    made = CliRunner().invoke(app, ["eval", "--seeds", "1", "--tasks", "single_trade", "--policies", "wait",
                                    "--workers", "1", "--db", db, "--out", str(tmp_path / "o.json")], env=ENV)
    assert made.exit_code == 0, made.output
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE results SET row = 'not json {'")
    con.close()
    monkeypatch.setattr("sys.argv", ["gpu-arena", "report", "--db", db, "--out-dir", str(tmp_path / "r")])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "is not readable JSON" in out and "changed by hand" in out and "Traceback" not in out
