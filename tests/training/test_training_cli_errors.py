"""Bad option values of `data sft` and `train sft|grpo|rft|pipeline|prepare` are usage errors (exit 2,
a message naming the option), never a traceback, and they are found before any work: no episode
played, no model loaded, no output folder created, no run recorded in the store. These tests load
no model and play no episode: every invocation is refused."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _refused(args: list[str], says: str) -> str:
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit)  # typer's usage error, not an escaped exception
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())
    assert says in text, text
    return text


def _nothing_done(tmp_path: Path, *outputs: Path) -> None:
    for out in outputs:
        assert not out.exists(), f"{out} was created"
    assert not (tmp_path / "a.db").exists(), "the store was written"


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """A directory that passes the checkpoint check (a config.json); never loaded by these tests."""
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "config.json").write_text("{}")
    return ck


@pytest.fixture
def sft_data(tmp_path: Path) -> Path:
    """A path --data accepts; the refusals come before it is read."""
    data = tmp_path / "data"
    data.mkdir()
    return data


@pytest.mark.parametrize(("extra", "says"), [
    (["--seed-start", "99999999999999999999999"], "--seed-start"),
    (["--seed-start", "-1"], "--seed-start"),
    (["--seeds", "99999999999999999"], "--seeds"),
    (["--opponents", "nope"], "--opponents: unknown policy 'nope'"),
    (["--opponents", "a,b"], "--opponents takes one policy for every other seat"),
    (["--opponents", "lab_1=x"], "--opponents takes one policy for every other seat"),
    (["--task", ""], "--task names no task"),
    (["--task", "single_trade,chess"], "unknown task 'chess'"),
    (["--min-return", "nan"], "--min-return must be a finite number"),
])
def test_data_sft_refuses_bad_options_before_playing(tmp_path: Path, extra: list[str], says: str) -> None:
    out = tmp_path / "out"
    _refused(["data", "sft", "--seeds", "1", "--output", str(out), *extra], says)
    _nothing_done(tmp_path, out)


def test_data_sft_finds_an_unwritable_output_before_playing(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _refused(["data", "sft", "--seeds", "1", "--output", str(blocker / "sub" / "out")], f"{blocker} is a file")
    _refused(["data", "sft", "--seeds", "1", "--output", str(blocker)], "is a file; expected a directory")
    assert blocker.read_text() == "" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.parametrize(("extra", "says"), [
    (["--lr", "nan"], "--lr must be a finite number above 0, got nan"),
    (["--lr", "-1"], "--lr must be a finite number above 0"),
    (["--lr", "inf"], "--lr must be a finite number above 0, got inf"),
    (["--epochs", "nan"], "--epochs must be a finite number above 0"),
    (["--epochs", "0"], "--epochs must be a finite number above 0"),
    (["--seed", "-1"], "--seed"),
    (["--seed", "1e23"], "--seed"),
    (["--seed", str(2**40)], "--seed"),
    (["--model", "/nonexistent/ck"], "--model /nonexistent/ck: not a checkpoint directory"),
])
def test_train_sft_refuses_bad_options_before_loading(tmp_path: Path, sft_data: Path, extra: list[str],
                                                      says: str) -> None:
    out = tmp_path / "out"
    _refused(["train", "sft", "--data", str(sft_data), "--output", str(out), "--db", str(tmp_path / "a.db"),
              "--max-steps", "1", *extra], says)
    _nothing_done(tmp_path, out)


def test_train_sft_refuses_missing_data_before_creating_the_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _refused(["train", "sft", "--data", str(tmp_path / "none"), "--output", str(out), "--db",
              str(tmp_path / "a.db")], "no such file or directory")
    _nothing_done(tmp_path, out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("extra", "says"), [
    (["--temperature", "nan"], "--temperature must be a finite number above 0"),
    (["--temperature", "-1"], "--temperature must be a finite number above 0"),
    (["--lr", "inf"], "--lr must be a finite number above 0, got inf"),
    (["--env-url", "notaurl"], "--env-url expects http(s)://host[:port]"),
    (["--env-url", "http://127.0.0.1:99999"], "--env-url"),
    (["--opponents", "nope"], "--opponents: unknown policy 'nope'"),
    (["--opponents", "league:best"], "expected league:topK"),
    (["--tasks", ""], "--task names no task"),
    (["--tasks", " , "], "--task names no task"),
    (["--seed", "-1"], "--seed"),
    (["--seed-start", "1e23"], "--seed-start"),
    (["--seed-start", str(2**70)], "--seed-start"),
    (["--seeds", "99999999999999999"], "--seeds"),
    (["--model", "/nonexistent/ck"], "--model /nonexistent/ck: not a checkpoint directory"),
])
def test_train_grpo_refuses_bad_options_before_loading(tmp_path: Path, checkpoint: Path, extra: list[str],
                                                       says: str) -> None:
    out = tmp_path / "out"
    _refused(["train", "grpo", "--model", str(checkpoint), "--max-steps", "1", "--output", str(out),
              "--db", str(tmp_path / "a.db"), *extra], says)
    _nothing_done(tmp_path, out)


def test_train_grpo_refuses_a_server_that_does_not_answer(tmp_path: Path, checkpoint: Path) -> None:
    out = tmp_path / "out"
    url = f"http://127.0.0.1:{_free_port()}"
    _refused(["train", "grpo", "--model", str(checkpoint), "--max-steps", "1", "--output", str(out),
              "--db", str(tmp_path / "a.db"), "--env-url", url], f"--env-url {url}: no GPU Arena server answers")
    _nothing_done(tmp_path, out)


@pytest.mark.parametrize(("extra", "says"), [
    (["--proposal", "nope"], "--proposal: unknown scripted policy 'nope'"),
    (["--proposal", "rule_expert,without:dance"], "--proposal: unknown step 'dance'"),
    (["--proposal", "wait,,rule_expert"], "--proposal: 'wait,,rule_expert' names an empty policy"),
    (["--finisher", "nope"], "--finisher: unknown scripted policy 'nope'"),
    (["--teacher", "llm:hf:x"], "--teacher: unknown scripted policy"),
    (["--tasks", ""], "--task names no task"),
    (["--lr", "nan"], "--lr must be a finite number above 0"),
    (["--temperature", "0"], "--temperature must be a finite number above 0"),
    (["--epochs", "inf"], "--epochs must be a finite number above 0"),
    (["--min-return", "nan"], "--min-return must be a finite number"),
    (["--dpo-beta", "0"], "--dpo-beta must be a finite number above 0"),
    (["--dpo-lr-scale", "inf"], "--dpo-lr-scale must be a finite number above 0"),
    (["--corrections-lr-scale", "0"], "--corrections-lr-scale must be a finite number above 0"),
    (["--corrections-lr-scale", "0.5"], "corrections_lr_scale sets the changed turns' own pass"),
    (["--cumulative-corrections", "--train-on", "episodes"], "cumulative_corrections keeps the changed turns' own"),
    (["--preference", "ipo"], "unknown preference 'ipo'"),
    (["--preference", "dpo", "--explore", "turn", "--no-anchors"], "a preference pass needs explore=lookahead"),
    (["--seed", "-1"], "--seed"),
    (["--seed-start", "99999999999999999999"], "--seed-start"),
    (["--worlds", "99999999999"], "--worlds"),
    (["--model", "/nonexistent/ck"], "--model /nonexistent/ck: not a checkpoint directory"),
])
def test_train_rft_refuses_bad_options_before_loading(tmp_path: Path, checkpoint: Path, extra: list[str],
                                                      says: str) -> None:
    out = tmp_path / "out"
    _refused(["train", "rft", "--model", str(checkpoint), "--max-steps", "1", "--output", str(out),
              "--db", str(tmp_path / "a.db"), *extra], says)
    _nothing_done(tmp_path, out)


@pytest.mark.parametrize(("extra", "says"), [
    (["--model", "/nonexistent/ck"], "--model /nonexistent/ck: not a checkpoint directory"),
    (["--seed", "-1"], "--seed"),
    (["--data-seeds", "99999999999999999"], "--data-seeds"),
    (["--eval-seeds", "99999999999999999"], "--eval-seeds"),
    (["--tasks", "single_trade,chess"], "--tasks: unknown task 'chess'"),
    (["--task", "chess"], "--tasks: unknown task 'chess'"),
    (["--eval-tasks", "single_trade,chess"], "--eval-tasks: unknown task 'chess'"),
    (["--eval-range", "future"], "unknown --eval-range 'future'"),
    (["--eval-range", "test", "--eval-seeds", "10001"], "the test range holds 10,000 seeds"),
    (["--curriculum", "ordered", "--rl", "grpo"], "--curriculum orders RFT's iterations"),
    (["--preference", "ipo"], "unknown preference 'ipo'"),
    (["--preference", "dpo", "--rl", "grpo"], "--preference and its --dpo-* options are RFT's"),
    (["--dpo-beta", "0"], "--dpo-beta must be a finite number above 0"),
    (["--dpo-lr-scale", "nan"], "--dpo-lr-scale must be a finite number above 0"),
    (["--rl-corrections-lr-scale", "nan"], "--rl-corrections-lr-scale must be a finite number above 0"),
    (["--rl-cumulative-corrections"], "--rl-cumulative-corrections keeps the changed turns' own pass"),
])
def test_train_pipeline_refuses_bad_options_before_the_data_stage(tmp_path: Path, extra: list[str],
                                                                  says: str) -> None:
    out = tmp_path / "out"
    _refused(["train", "pipeline", "--preset", "tiny", "--output", str(out), "--db", str(tmp_path / "a.db"),
              *extra], says)
    _nothing_done(tmp_path, out)


def test_train_commands_refuse_a_file_as_output(tmp_path: Path, checkpoint: Path, sft_data: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    db = str(tmp_path / "a.db")
    for args in (["train", "sft", "--data", str(sft_data)], ["train", "grpo", "--model", str(checkpoint)],
                 ["train", "rft", "--model", str(checkpoint)], ["train", "pipeline", "--preset", "tiny"]):
        _refused([*args, "--output", str(blocker), "--db", db], "is a file; expected a directory")
    _refused(["train", "prepare", "--preset", "tiny", "--output", str(blocker / "x")], f"{blocker} is a file")
    _nothing_done(tmp_path)
    assert blocker.read_text() == ""
