"""The RL stage's pieces: batched rollouts score what the environment scores, expert iteration keeps
the right episodes and trains through TRL, the pipeline runs end to end and resumes, and the
training commands show progress instead of raw logs."""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app
from gpu_arena.core.types import REWARD_COLUMNS
from gpu_arena.llm.parsing import FormatError, parse_action
from gpu_arena.training.data import load_sft_data
from gpu_arena.training.pipeline import COMPARISONS, PipelineRun, run_pipeline
from gpu_arena.training.presets import PresetError, load_pretrained
from gpu_arena.training.progress import describe, quiet_third_party
from gpu_arena.training.rft import select_rollouts
from gpu_arena.training.rollouts import BatchedSampler, Rollout, World
from training_helpers import make_sft_data, replay, scripted_checkpoint

ALLOCATE = '<tool_call>\n{"name": "allocate_to_job", "arguments": {}}\n</tool_call>'


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sft_data(tmp_path_factory.mktemp("rl") / "data", seeds=8)


@pytest.mark.parametrize("temperature", [0.0, 1.5])
def test_batched_rollouts_score_what_the_environment_scores(tiny_sft: Path, temperature: float) -> None:
    model, tok = load_pretrained(tiny_sft)
    worlds = [World("single_trade", "train", s) for s in (3, 3, 4, 5)] + [World("market_round", "holdout", 1)]
    rollouts, stats = BatchedSampler(model, tok, temperature=temperature, max_new_tokens=40, batch_size=3).play(
        worlds, seed=7)
    assert [r.world for r in rollouts] == worlds and stats.episodes == len(worlds)
    for r in rollouts:
        total, columns = replay(r.world, r.actions)
        assert r.episode_return == pytest.approx(total, abs=1e-9)
        for c in REWARD_COLUMNS:
            assert r.columns[c] == pytest.approx(columns[c], abs=1e-9)
        assert r.turns == len(r.actions) and r.valid_turns <= r.turns
    if temperature == 0.0:  # greedy: the same world gives the same episode, whatever its batch neighbours
        assert rollouts[0].actions == rollouts[1].actions
    again, _ = BatchedSampler(model, tok, temperature=temperature, max_new_tokens=40, batch_size=3).play(worlds, seed=7)
    assert [r.actions for r in again] == [r.actions for r in rollouts]  # seeded


def test_a_batched_checkpoint_evaluation_gives_the_harness_own_rows(tiny_sft: Path) -> None:
    """The pipeline evaluates checkpoints batched; every field of every row (return, columns, metrics,
    the replay's transcript) equals what ``run_evaluation`` gives the same ``llm:hf`` policy."""
    from gpu_arena.evaluation import run_evaluation
    from gpu_arena.training.evaluate import evaluate_checkpoint

    policy = f"llm:hf:{tiny_sft}?mode=tools&max_tokens=40"
    tasks, seeds = ["single_trade", "market_round"], [0, 1, 2]
    optima: dict[Any, Any] = {}
    ticks: list[int] = []
    batched = evaluate_checkpoint(tiny_sft, policy, tasks, "holdout", seeds, optima=optima, keep_replays=True,
                                  max_new_tokens=40, progress=ticks.append)
    one_by_one = run_evaluation([policy], tasks, "holdout", seeds, keep_replays=True)
    assert sum(ticks) == len(batched) == 6 and set(optima) == {(t, "holdout", s) for t in tasks for s in seeds}

    def key(r: Any) -> tuple[str, int]:
        return (r.task, r.seed)

    for a, b in zip(sorted(batched, key=key), sorted(one_by_one, key=key), strict=True):
        assert {**a.to_dict(), "llm_usage": None} == {**b.to_dict(), "llm_usage": None}
    assert all(r.replay and r.replay["transcript"] for r in batched)


def test_eval_plays_greedy_checkpoints_batched_with_the_same_rows(tiny_sft: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``gpu-arena eval`` plays a greedy ``llm:hf`` checkpoint batched by default: its rows, and its
    place among the other policies' rows, equal those of ``--no-batch`` (one episode at a time); a
    sampled one (temperature above 0) is left to the harness."""
    from gpu_arena.training import evaluate
    from gpu_arena.training.evaluate import batched_spec

    calls: list[str] = []
    played = evaluate.evaluate_checkpoint

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        return played(*args, **kwargs)

    monkeypatch.setattr(evaluate, "evaluate_checkpoint", counted)

    policy = f"llm:hf:{tiny_sft}?mode=tools&max_tokens=40&constrained=1"
    assert batched_spec(policy) == (str(tiny_sft), "tools", 40, True)
    assert batched_spec(f"llm:hf:{tiny_sft}?temperature=0.7") is None
    assert batched_spec(f"llm:hf:{tiny_sft}?device=cpu") is None and batched_spec("rule_expert") is None
    rows = {}
    for flag in ("--batch", "--no-batch"):
        out = tmp_path / f"{flag}.json"
        result = CliRunner().invoke(app, ["eval", "--policies", f"no_negotiation,{policy}", "--tasks",
                                          "single_trade,market_round", "--seeds", "2", "--workers", "1",
                                          "--out", str(out), "--db", str(tmp_path / "arena.db"), flag])
        assert result.exit_code == 0, result.output
        assert calls == ([policy] if flag == "--batch" else [])
        calls.clear()
        rows[flag] = [{k: v for k, v in r.items() if k != "llm_usage"}
                      for r in json.loads(out.read_text())["results"]]
    assert rows["--batch"] == rows["--no-batch"]
    assert [r["policy"] for r in rows["--batch"]] == ["no_negotiation", policy] * 2


def test_teacher_replay_adds_fresh_teacher_episodes_each_iteration() -> None:
    from gpu_arena.training.rft import REPLAY_SEED_START, RFTRun, teacher_records

    run = RFTRun(output_dir="unused", preset="tiny", replay=3, teacher="rule_expert").resolved()
    first, second = teacher_records(run, 0), teacher_records(run, 1)
    assert [r["seed"] for r in first] == [REPLAY_SEED_START + k for k in range(3)]
    assert [r["seed"] for r in second] == [REPLAY_SEED_START + 3 + k for k in range(3)]
    assert all(r["policy"] == "rule_expert" and r["split"] == "train" and r["tools"] for r in first + second)
    assert teacher_records(RFTRun(output_dir="unused", preset="tiny", replay=0).resolved(), 0) == []


def test_a_rollout_is_an_sft_record_whose_actions_parse_back(tmp_path: Path, sft_data: Path) -> None:
    ds, _ = load_sft_data(sft_data)
    model_dir = scripted_checkpoint(tmp_path / "m", [dict(r) for r in ds], ALLOCATE)
    model, tok = load_pretrained(model_dir)
    [r], _ = BatchedSampler(model, tok, temperature=1.0).play([World("single_trade", "train", 2)])
    assert r.format_errors == 0 and all(a.action_type == "allocate_to_job" for a in r.actions)
    rec = r.record("rft")
    assert rec["mode"] == "tools" and rec["episode_return"] == r.episode_return
    calls = [m["tool_calls"] for m in rec["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
    assert [parse_action(c) for c in calls] == r.actions
    roles = [m["role"] for m in rec["messages"]]
    assert roles[:3] == ["system", "user", "assistant"] and roles[-1] == "assistant" and "tool" in roles
    # the chat renders with the template (what SFTTrainer will tokenise)
    assert tok.apply_chat_template(rec["messages"], tools=rec["tools"], tokenize=False)


def _rollout(world: World, ret: float, format_errors: int = 0) -> Rollout:
    return Rollout(world=world, messages=[], episode_return=ret, format_errors=format_errors)


def test_select_rollouts_keeps_what_beats_its_own_world() -> None:
    a, b = World("single_trade", "train", 1), World("single_trade", "train", 2)
    rs = [_rollout(a, 0.3), _rollout(a, 0.1), _rollout(a, -0.1), _rollout(b, 0.2), _rollout(b, 0.2),
          _rollout(a, 0.5, format_errors=1)]
    # group mean (a: 0.2 with the unreadable one; b: all equal, nothing to learn)
    assert [r.episode_return for r in select_rollouts(rs, -1.0)] == [0.3]
    # the greedy episode as the baseline
    kept = select_rollouts(rs, -1.0, greedy={a: 0.0, b: 0.1})
    assert [(r.world.seed, r.episode_return) for r in kept] == [(1, 0.3), (1, 0.1), (2, 0.2), (2, 0.2)]
    # and a floor: nothing worse than not trading
    assert [r.episode_return for r in select_rollouts(rs, 0.25, greedy={a: -1.0, b: 0.0})] == [0.3]
    assert select_rollouts([_rollout(a, float("-inf"))], -1.0, greedy={a: 0.0}) == []


def test_tiny_pipeline_end_to_end_and_resumed(tmp_path: Path) -> None:
    out, db = tmp_path / "run", str(tmp_path / "arena.db")
    res = CliRunner().invoke(app, ["train", "pipeline", "--preset", "tiny", "--output", str(out), "--db", db,
                                   "--workers", "1"])
    assert res.exit_code == 0, res.output
    evidence = json.loads((out / "evidence.json").read_text())
    assert set(evidence["wall_s"]) == {"data", "sft", "rl", "eval"}
    assert evidence["command"].startswith("gpu-arena train pipeline") and evidence["seeds"]["holdout"] == [0, 2]
    names = {(c["task"], c["comparison"]) for c in evidence["comparisons"]}
    # every comparison but the zero-shot one: a model initialised at random has no pretrained start
    assert names == {(t, n) for t in ("single_trade", "market_round") for n, _, second in COMPARISONS
                     if second != "zero_shot"}
    assert "zero_shot" not in evidence["policies"]
    for c in evidence["comparisons"]:
        assert c["n"] == 3 and c["ci_low"] <= c["mean_diff"] <= c["ci_high"] and c["wins"] + c["losses"] <= 3
    roles = {r["role"] for r in evidence["results"]}
    assert {"trained", "sft", "no_negotiation", "rule_expert"} <= roles
    assert {t["role"] for t in evidence["valid_turns"]} >= {"trained", "sft"}
    con = sqlite3.connect(db)
    kinds = [k for (k,) in con.execute("SELECT kind FROM training_runs ORDER BY id")]
    assert kinds == ["pipeline", "sft", "rft"]
    pipeline_run = con.execute("SELECT status, summary FROM training_runs WHERE kind = 'pipeline'").fetchone()
    assert pipeline_run[0] == "finished" and json.loads(pipeline_run[1])["evidence"] == evidence
    assert con.execute("SELECT COUNT(*) FROM runs WHERE kind = 'eval'").fetchone()[0] == 1
    assert set(evidence["runs"]) == {"sft", "rl", "eval"}

    # the evidence renders as the docs show it, every comparison a row
    res = CliRunner().invoke(app, ["train", "evidence", str(out), "--markdown"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("`gpu-arena train pipeline --preset tiny --output ")
    rows = [line.split("|") for line in res.output.splitlines() if line.startswith("|")]
    assert sum(r[1].strip() == "single_trade" for r in rows) == 4  # the comparisons
    # a table per task: trained, sft and three baselines, each with its deal rate, gain share and surplus
    single = res.output.split("**single_trade**")[1].split("**market_round**")[0]
    assert "| deal rate | gain share | surplus over BATNA |" in single
    assert [r.split("|")[1].strip() for r in single.splitlines() if r.startswith("| ") and "---" not in r][1:] == [
        "trained", "sft", "no_negotiation", "rule_expert", "random_valid"]
    assert "the validation range" in res.output.splitlines()[0]
    res = CliRunner().invoke(app, ["train", "evidence", str(tmp_path / "nothing.json")])
    assert res.exit_code != 0 and "cannot read evidence" in " ".join(res.output.replace("│", " ").split())

    # resuming at eval reuses the checkpoints: SFT and RL are not trained again
    sft_mtime = (out / "sft" / "model.safetensors").stat().st_mtime_ns
    res = CliRunner().invoke(app, ["train", "pipeline", "--preset", "tiny", "--output", str(out), "--db", db,
                                   "--workers", "1", "--from-stage", "eval", "--eval-tasks", "single_trade"])
    assert res.exit_code == 0, res.output
    assert (out / "sft" / "model.safetensors").stat().st_mtime_ns == sft_mtime
    assert [k for (k,) in con.execute("SELECT kind FROM training_runs")] == ["pipeline", "sft", "rft", "pipeline"]
    state = json.loads((out / "pipeline.json").read_text())
    assert all(v["status"] == "finished" for v in state["stages"].values())

    # the RL stage's control (its teacher replay alone) on a copy of the same data and SFT start, and the
    # trained models of the two compared by holdout world
    import shutil

    control = tmp_path / "control"
    for stage in ("data", "sft"):
        shutil.copytree(out / stage, control / stage)
    res = CliRunner().invoke(app, ["train", "pipeline", "--preset", "tiny", "--output", str(control), "--db", db,
                                   "--workers", "1", "--from-stage", "rl", "--rl-worlds", "0", "--rl-replay", "1"])
    assert res.exit_code == 0, res.output
    rl_metrics = [json.loads(line) for line in (control / "rl" / "metrics.jsonl").read_text().splitlines()]
    # the preset replays two teacher episodes an iteration; --rl-replay 1, one
    assert [m["worlds"] for m in rl_metrics] == [0, 0] and all(m["trained_on"] == 1 for m in rl_metrics)
    assert "--rl-replay 1" in json.loads((control / "pipeline.json").read_text())["command"]
    res = CliRunner().invoke(app, ["train", "compare", str(out), str(control), "--markdown"])
    assert res.exit_code == 0, res.output
    [row] = [line.split("|") for line in res.output.splitlines() if line.startswith("| single_trade")]
    assert row[2].strip() == "3"  # the three holdout worlds both evaluated, paired
    res = CliRunner().invoke(app, ["train", "compare", str(out), str(control), "--role", "sft"])
    assert res.exit_code == 0 and "+0.0000" in res.output  # the same SFT start, the same episodes


def test_pipeline_refuses_a_stage_without_its_inputs(tmp_path: Path) -> None:
    with pytest.raises(PresetError, match="needs"):
        run_pipeline(PipelineRun(output=str(tmp_path / "x"), preset="tiny", from_stage="rl"))
    with pytest.raises(PresetError, match="unknown stage"):
        run_pipeline(PipelineRun(output=str(tmp_path / "x"), preset="tiny", from_stage="nope"))
    with pytest.raises(PresetError, match="no_negotiation"):
        run_pipeline(PipelineRun(output=str(tmp_path / "x"), preset="tiny", baselines=("rule_expert",)))
    with pytest.raises(PresetError, match="nothing to learn from"):
        run_pipeline(PipelineRun(output=str(tmp_path / "x"), preset="tiny", rl_worlds=0, rl_replay=0))
    with pytest.raises(PresetError, match="--rl-replay is RFT's"):
        run_pipeline(PipelineRun(output=str(tmp_path / "x"), preset="tiny", rl_method="grpo", rl_replay=4))
    res = CliRunner().invoke(app, ["train", "pipeline", "--preset", "tiny", "--output", str(tmp_path / "y"),
                                   "--from-stage", "sft"])
    assert res.exit_code != 0 and "needs" in res.output


def test_progress_line_and_quiet_warnings() -> None:
    line = describe({"loss": 0.41234, "arena/valid_action_rate": 0.97, "arena/episodes_per_min": 312.4,
                     "reward": float("nan"), "other": 1})
    assert line == "loss 0.412 · valid 0.97 · ep/min 312"
    # the rollout engine's figures: turns a second and the share of sampling inside generate
    assert describe({"arena/turns_per_s": 41.6, "generate_share": 0.823}) == "turns/s 42 · gen 82%"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_third_party():
            warnings.warn("old API", FutureWarning, stacklevel=1)
        with quiet_third_party(verbose=True):
            warnings.warn("shown", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["shown"]


def test_training_commands_share_option_names() -> None:
    runner = CliRunner()
    for cmd in ("sft", "grpo", "rft", "pipeline"):
        res = runner.invoke(app, ["train", cmd, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0 and "--max-steps" in res.output and "--verbose" in res.output, cmd


def test_format_errors_count_as_invalid_turns(tmp_path: Path, sft_data: Path) -> None:
    ds, _ = load_sft_data(sft_data)
    model_dir = scripted_checkpoint(tmp_path / "m", [dict(r) for r in ds], "not a tool call at all")
    model, tok = load_pretrained(model_dir)
    [r], _ = BatchedSampler(model, tok, temperature=0.0).play([World("single_trade", "train", 2)])
    assert r.format_errors == r.turns > 0 and r.valid_turns == 0 and r.record("x") == {}
    assert all(isinstance(a, FormatError) for a in r.actions)
    assert r.episode_return == pytest.approx(replay(r.world, r.actions)[0])


def test_gpu_recipe_switches_reach_the_trainers_config() -> None:
    from trl import GRPOConfig

    from gpu_arena.training.accel import Accel
    from gpu_arena.training.grpo import GRPORun, grpo_config_kwargs

    accel = Accel(use_vllm=True, vllm_mode="server", vllm_server_url="http://127.0.0.1:8001", bf16=True,
                  gradient_checkpointing=True)
    run = GRPORun(output_dir="/tmp/unused", model="m", preset="small", accel=accel).resolved()
    kwargs = grpo_config_kwargs(run)
    assert kwargs["use_vllm"] is True and kwargs["vllm_mode"] == "server" and kwargs["bf16"] is True
    assert kwargs["vllm_server_base_url"] == "http://127.0.0.1:8001" and kwargs["activation_checkpointing"] is True
    # TRL accepts the recipe's configuration (bf16 itself needs the GPU: checked without it here)
    config = GRPOConfig(**{**kwargs, "bf16": False})
    assert config.use_vllm and config.vllm_mode == "server" and config.gradient_checkpointing
    assert config.num_generations == run.num_generations and config.beta == run.beta
    # the CPU run's defaults: none of it
    plain = grpo_config_kwargs(GRPORun(output_dir="/tmp/unused", model="m", preset="small").resolved())
    assert "use_vllm" not in plain and plain["bf16"] is False
    assert GRPOConfig(**plain).gradient_checkpointing is False  # TRL's default (True) recomputes for nothing here


def test_gpu_switches_the_machine_cannot_honour_are_clear_errors(tmp_path: Path) -> None:
    import importlib.util

    from gpu_arena.training.accel import Accel

    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(PresetError, match="pip install vllm"):
            Accel(use_vllm=True).validate()
        res = CliRunner().invoke(app, ["train", "grpo", "--preset", "tiny", "--model", str(tmp_path),
                                       "--output", str(tmp_path / "o"), "--use-vllm"])
        said = " ".join(res.output.replace("│", " ").split())
        assert res.exit_code != 0 and "pip install vllm" in said and "Traceback" not in res.output
    with pytest.raises(PresetError, match="needs a GPU"):
        Accel(bf16=True).validate(cuda=False)
    Accel(bf16=True).validate(cuda=True)
    with pytest.raises(PresetError, match="vLLM mode"):
        Accel(vllm_mode="remote").validate()
    with pytest.raises(PresetError, match="--rl grpo"):
        run_pipeline(PipelineRun(output=str(tmp_path / "p"), preset="tiny", accel=Accel(use_vllm=True)))
    cmd = PipelineRun(output="out", preset="small", rl_method="grpo", lora=True,
                      accel=Accel(use_vllm=True, bf16=True)).command_line()
    assert cmd == ("gpu-arena train pipeline --preset small --output out --rl grpo --lora --use-vllm "
                   "--vllm-mode colocate --bf16")


def test_runs_take_what_the_command_left_open_from_the_preset() -> None:
    from gpu_arena.training.grpo import GRPORun
    from gpu_arena.training.presets import get_preset
    from gpu_arena.training.rft import RFTRun

    small = get_preset("small")
    g = GRPORun(output_dir="o", model="m", preset="small", learning_rate=0.5).resolved()
    assert g.learning_rate == 0.5 and g.max_steps == small.grpo.max_steps and g.beta == small.grpo.beta
    assert g.scale_rewards == small.grpo.scale_rewards and g.lora is small.grpo.lora
    r = RFTRun(output_dir="o", model="m", preset="small", proposal="", cumulative=False).resolved()
    assert r.proposal is None and r.cumulative is False and r.anchors is small.rft.anchors
    assert r.explore == small.rft.explore and r.worlds_per_iteration == small.rft.worlds_per_iteration
    assert r.min_return is None and r.iterations == small.rft.iterations
