"""SFT data: episodes of a scripted policy as chats in the LLM agents' format, saved with provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app
from gpu_arena.evaluation.runner import play_episode
from gpu_arena.llm import parse_action, system_prompt
from gpu_arena.llm.parsing import FormatError
from gpu_arena.llm.tools import ACTION_FIELDS, action_tools
from gpu_arena.training.data import (
    DataError,
    SFTDataSpec,
    build_sft_records,
    load_sft_data,
    play_episode_record,
    save_sft_data,
    select_records,
)


def test_a_record_is_the_agents_chat_and_scores_what_the_harness_scores() -> None:
    rec = play_episode_record("rule_expert", "single_trade", "train", 3, mode="tools")
    msgs = rec.messages
    assert msgs[0] == {"role": "system", "content": system_prompt("tools")}
    assert msgs[1]["role"] == "user"
    calls = [m for m in msgs if m["role"] == "assistant" and m.get("tool_calls")]
    assert len(calls) == rec.steps
    for i, m in enumerate(msgs[2:-1], start=2):
        if m["role"] == "assistant":
            call = m["tool_calls"][0]["function"]
            assert list(call["arguments"]) == [f for f in ACTION_FIELDS[call["name"]] if f in call["arguments"]]
            assert not isinstance(parse_action(m["tool_calls"]), FormatError)
            assert msgs[i + 1]["role"] == "tool" and msgs[i + 1]["name"] == call["name"]
    assert msgs[-2]["role"] == "tool" and msgs[-2]["content"].endswith("The episode is over.")
    assert msgs[-1] == {"role": "assistant", "content": ""}
    # the same policy in the harness, on the same world, scores the same return
    assert rec.episode_return == pytest.approx(play_episode("rule_expert", "single_trade", "train", 3).episode_return,
                                               abs=1e-9)
    assert rec.to_json()["tools"] == action_tools()


def test_json_mode_answers_with_one_json_object() -> None:
    rec = play_episode_record("rule_expert", "market_round", "train", 1, mode="json")
    assert rec.messages[0]["content"] == system_prompt("json")
    answers = [m for m in rec.messages if m["role"] == "assistant"]
    assert len(answers) == rec.steps and all("tool_calls" not in m for m in answers)
    for m in answers:
        obj = json.loads(m["content"])
        assert obj["action_type"] in ACTION_FIELDS
        assert not isinstance(parse_action(m["content"]), FormatError)
    assert all(m["role"] in ("system", "user", "assistant") for m in rec.messages)


def test_filters_keep_high_return_episodes() -> None:
    recs, _ = build_sft_records(SFTDataSpec(seeds=tuple(range(8))))
    returns = sorted(r.episode_return for r in recs)
    top = select_records(recs, None, 0.25)
    assert len(top) == 2 and min(r.episode_return for r in top) >= returns[-2]
    floor = returns[4]
    assert all(r.episode_return >= floor for r in select_records(recs, floor, None))
    with pytest.raises(DataError, match="kept none"):
        build_sft_records(SFTDataSpec(seeds=(0, 1), min_return=1e9))


def test_saved_dataset_round_trips_with_provenance(tmp_path: Path) -> None:
    recs, prov = build_sft_records(SFTDataSpec(seeds=(0, 1, 2), tasks=("single_trade", "market_round")))
    paths = save_sft_data(recs, prov, tmp_path / "d")
    for source in (tmp_path / "d", paths["dataset"], paths["jsonl"]):
        ds, p = load_sft_data(source)
        assert len(ds) == 6 and p["policy"] == "rule_expert" and p["seeds"] == [0, 1, 2]
        assert p["tasks"] == ["single_trade", "market_round"] and "git_commit" in p
        # Json storage keeps every tool call's own arguments (no keys borrowed from other calls)
        assert ds[0]["messages"] == recs[0].messages
        assert ds[0]["tools"] == action_tools()


@pytest.mark.parametrize("change, message", [
    ({"tasks": ("chess",)}, "unknown task"), ({"split": "test"}, "unknown split"),
    ({"mode": "xml"}, "unknown mode"), ({"policy": "nobody"}, "unknown policy"),
    ({"top_fraction": 0.0}, "top_fraction"), ({"policy": "llm:hf:x"}, "scripted policies"),
])
def test_bad_specs_are_structured_errors(change: dict[str, object], message: str) -> None:
    with pytest.raises(DataError, match=message):
        SFTDataSpec(seeds=(0,), **change).validate()  # type: ignore[arg-type]


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_sft_data(tmp_path / "missing")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(DataError, match="not JSON"):
        load_sft_data(bad)


def test_data_sft_command(tmp_path: Path) -> None:
    out = tmp_path / "data"
    res = CliRunner().invoke(app, ["data", "sft", "--policy", "oracle", "--seeds", "2", "--task", "single_trade",
                                   "--mode", "json", "--output", str(out)])
    assert res.exit_code == 0, res.output
    ds, prov = load_sft_data(out)
    assert len(ds) == 2 and prov["policy"] == "oracle" and prov["mode"] == "json"
    lines = (out / "sft.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["policy"] == "oracle"
    res = CliRunner().invoke(app, ["data", "sft", "--task", "chess", "--output", str(tmp_path / "x")])
    assert res.exit_code != 0 and "unknown task" in " ".join(res.output.replace("│", " ").split())


def test_turn_stats_split_format_errors_from_rule_errors() -> None:
    from gpu_arena.training.evaluate import turn_stats

    rec = {"policy": "p", "task": "single_trade", "split": "holdout", "transcript": [
        {"actions": {"lab_0": {"action_type": "wait"}}, "results": {"lab_0": [True, "ok"]}},
        {"actions": {"lab_0": {"rejected": "format_invalid_json", "message": "x"}},
         "results": {"lab_0": [False, "format_invalid_json"]}},
        {"actions": {"lab_0": {"action_type": "accept_offer"}}, "results": {"lab_0": [False, "missing_field"]}},
        {"actions": {}, "results": {"lab_0": [True, "ok"]}},  # finished: no action recorded, not a turn
    ]}
    (row,) = turn_stats([rec, rec])
    assert (row["episodes"], row["turns"], row["accepted"], row["format_errors"], row["rule_errors"]) == (2, 6, 2, 2, 2)
    assert row["valid_rate"] == pytest.approx(1 / 3) and row["codes"] == {"format_invalid_json": 2, "missing_field": 2}
