"""Training end to end on CPU with tiny models: SFT, GRPO against the live environment, run logging,
trained checkpoints as ``llm:hf:`` policies, and the reward the GRPO trainer sees."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app
from gpu_arena.core.types import ACTION_TYPES, REWARD_COLUMNS
from gpu_arena.env import GpuArenaEnv
from gpu_arena.evaluation.runner import play_episode
from gpu_arena.llm import action_tools, system_prompt
from gpu_arena.llm.parsing import FormatError
from gpu_arena.models import ArenaAction
from gpu_arena.policies import make_policy
from gpu_arena.training.arena_env import EPISODE_OVER, ArenaToolEnv
from gpu_arena.training.data import load_sft_data
from gpu_arena.training.runlog import connect, list_training_runs, load_training_run
from server_helpers import running_server, settings_for
from training_helpers import make_sft_data, scripted_checkpoint

ALLOCATE = '<tool_call>\n{"name": "allocate_to_job", "arguments": {}}\n</tool_call>'


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_sft_data(tmp_path_factory.mktemp("train") / "data", seeds=8)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory, sft_data: Path) -> Path:
    ds, _ = load_sft_data(sft_data)
    return scripted_checkpoint(tmp_path_factory.mktemp("scripted") / "model", [dict(r) for r in ds], ALLOCATE)


def said(res: Any) -> str:
    """A command's output as one line of text (rich draws error boxes and wraps words)."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", res.output).split())


def replay_return(world: dict[str, Any], actions: list[dict[str, Any]]) -> float:
    """The episode return of ``actions`` replayed in a fresh in-process environment."""
    env = GpuArenaEnv()
    env.reset(**world)
    total = 0.0
    for a in actions:
        step: Any = FormatError(a["rejected"], a.get("message", "")) if "rejected" in a else ArenaAction.model_validate(a)
        total += env.step(step).reward or 0.0
    assert env.episode is not None and env.episode.done
    return total


def test_tiny_sft_then_grpo_end_to_end(tmp_path: Path, sft_data: Path) -> None:
    db = str(tmp_path / "arena.db")
    sft_dir, grpo_dir = tmp_path / "sft", tmp_path / "grpo"
    runner = CliRunner()
    # batches grouped by length (the small preset's default): the sampler reads TRL's tokenized chats
    res = runner.invoke(app, ["train", "sft", "--preset", "tiny", "--data", str(sft_data), "--output", str(sft_dir),
                              "--db", db, "--group-by-length"])
    assert res.exit_code == 0, res.output
    meta = json.loads((sft_dir / "arena_training.json").read_text())
    assert meta["run"]["group_by_length"] is True
    assert meta["kind"] == "sft" and meta["model"]["parameters"] < 1_000_000
    assert meta["data_provenance"]["policy"] == "rule_expert"

    # the checkpoint is a policy for the harness (tools mode: its tokenizer parses its tool calls)
    result = play_episode(f"llm:hf:{sft_dir}?mode=tools&max_tokens=48", "single_trade", "holdout", 0)
    assert result.steps >= 3 and math.isfinite(result.episode_return)
    # self-play: the checkpoint in every seat, each seat's return and each seat's model ledger
    both = play_episode(f"llm:hf:{sft_dir}?mode=tools&max_tokens=48", "single_trade", "holdout", 0, opponents="self")
    assert set(both.seat_returns or {}) == {"lab_0", "lab_1"} and both.llm_usage is not None
    assert {"lab_0", "lab_1"} <= set(both.llm_usage) and both.llm_usage["lab_1"]["role"] == "opponent"

    # GRPO against a frozen checkpoint in every other seat: the SFT model, loaded once more as an opponent
    frozen = f"llm:hf:{sft_dir}?mode=tools&max_tokens=48"
    res = runner.invoke(app, ["train", "grpo", "--preset", "tiny", "--model", str(sft_dir), "--output", str(grpo_dir),
                              "--steps", "1", "--generations", "2", "--max-turn-tokens", "48", "--db", db,
                              "--opponents", frozen])
    assert res.exit_code == 0, res.output
    assert (grpo_dir / "model.safetensors").exists() and (grpo_dir / "metrics.jsonl").exists()
    assert json.loads((grpo_dir / "arena_training.json").read_text())["run"]["opponents"] == frozen
    # what that option builds: the checkpoint itself in the other seat, answering from its own view
    from gpu_arena.core.policy import Metered
    from gpu_arena.env import GpuArenaEnv

    env = GpuArenaEnv(task="single_trade", opponents=frozen)
    env.reset(seed=0)
    env.step({"action_type": "wait"})
    (opponent,) = env.policies.values()
    assert isinstance(opponent, Metered) and (opponent.usage() or {}).get("calls", 0) >= 1

    con = connect(db)
    runs = list_training_runs(con)
    assert [(r["kind"], r["status"]) for r in runs] == [("grpo", "finished"), ("sft", "finished")]
    sft_run = load_training_run(con, runs[1]["id"])
    grpo_run = load_training_run(con, runs[0]["id"])
    assert sft_run is not None and grpo_run is not None
    assert len(sft_run["series"]["loss"]["value"]) >= 2 and "tokens_per_s" in sft_run["series"]
    for key in ("loss", "reward", "reward_std", "arena/valid_action_rate", "tokens_per_s",
                *(f"rewards/{c}/mean" for c in REWARD_COLUMNS)):
        assert key in grpo_run["series"], key
    # the rollout's reward is the episode return: the env column and the summed step rewards agree
    row = grpo_run["metrics"][0]
    assert row["reward"] == pytest.approx(row["rewards/episode_return/mean"], abs=1e-6)  # the engine's rollouts
    assert row["reward"] == pytest.approx(row["rewards/normalized_reward/mean"], abs=1e-6)
    jsonl = [json.loads(x) for x in (grpo_dir / "metrics.jsonl").read_text().splitlines()]
    assert jsonl[0]["step"] == 1 and "reward" in jsonl[0]
    assert grpo_run["config"]["run"]["model"] == str(sft_dir)

    listing = runner.invoke(app, ["runs", "--db", db, "--json"])
    assert listing.exit_code == 0 and [r["kind"] for r in json.loads(listing.output)] == ["grpo", "sft"]
    shown = runner.invoke(app, ["runs", "show", str(runs[0]["id"]), "--db", db])
    assert shown.exit_code == 0 and "arena/valid_action_rate" in shown.output


def test_sft_batches_by_length_where_the_preset_says(tmp_path: Path) -> None:
    from gpu_arena.training.sft import SFTRun, sft_args

    def strategy(preset: str, **changes: Any) -> str:
        run = SFTRun(data="d", output_dir=str(tmp_path), preset=preset, **changes).resolved()
        return str(sft_args(run, tmp_path).train_sampling_strategy)

    assert strategy("small") == "group_by_length" and strategy("tiny") == "random"
    assert strategy("small", group_by_length=False) == "random"
    assert strategy("tiny", group_by_length=True) == "group_by_length"


@pytest.mark.parametrize("where", ["in-process", "server"])
def test_grpo_reward_is_the_environment_return_of_the_same_actions(tmp_path: Path, scripted: Path, where: str) -> None:
    if where == "server":
        with running_server(settings_for(tmp_path)) as url:
            check_grpo_rewards(tmp_path, scripted, url)
    else:
        check_grpo_rewards(tmp_path, scripted, None)


def check_grpo_rewards(tmp_path: Path, scripted: Path, env_url: str | None) -> None:
    from gpu_arena.training.grpo import GRPORun, build_trainer
    from gpu_arena.training.presets import load_pretrained

    model, tok = load_pretrained(scripted)
    run = GRPORun(output_dir=str(tmp_path / "out"), model=str(scripted), preset="tiny", max_steps=2,
                  num_generations=2, seeds=(5, 6, 7), env_url=env_url, scale_rewards="batch", beta=0.02,
                  rollouts="trl").resolved()
    trainer = build_trainer(run, model, tok)
    assert trainer.args.scale_rewards == "batch" and trainer.args.beta == pytest.approx(0.02)

    # the prompt the trainer renders is the one an agent in tools mode sends
    env = ArenaToolEnv()
    first = env.reset(task="single_trade", split="train", seed=5)
    trainer._batch_environments = [None]
    prompt = [{"role": "system", "content": system_prompt("tools")}, {"role": "user", "content": first}]
    trl_ids = trainer._tokenize_prompts([prompt])[0][0]
    agent_ids = tok.apply_chat_template(prompt, tools=action_tools(), add_generation_prompt=True, tokenize=True,
                                        return_dict=False)
    assert list(trl_ids) == list(agent_ids)

    seen: list[tuple[float, dict[str, Any], list[dict[str, Any]], float]] = []
    calculate = trainer._calculate_rewards

    def capture(inputs: Any, prompts: Any, completions: Any, ids: Any) -> Any:
        per_func = calculate(inputs, prompts, completions, ids)
        weights = trainer.reward_weights.to(per_func.device)
        for i, e in enumerate(trainer.environments):
            seen.append((float((per_func[i] * weights).nansum()), e.reset_args, e.actions, e.episode_return))
        return per_func

    trainer._calculate_rewards = capture
    trainer.train()
    assert len(seen) == 4
    for reward, world, actions, env_return in seen:
        assert world["task"] == "single_trade" and world["seed"] in (5, 6, 7)
        assert actions and all(a.get("action_type") == "allocate_to_job" for a in actions)
        assert reward == pytest.approx(env_return, abs=1e-6)
        assert reward == pytest.approx(replay_return(world, actions), abs=1e-6)
    # the trainer logged every reward column (weight 0) beside the environment's reward (weight 1)
    assert trainer.reward_func_names == [*REWARD_COLUMNS, "valid_action_rate", "ArenaToolEnv"]
    assert trainer.reward_weights.tolist() == [0.0] * (len(REWARD_COLUMNS) + 1) + [1.0]


@pytest.mark.parametrize("constrained", [False, True])
def test_grpo_on_the_engine_trains_on_the_model_tokens_and_the_environment_return(
        tmp_path: Path, scripted: Path, constrained: bool) -> None:
    """GRPO fed by the rollout engine: one completion per row, the model's own ids marked in the
    mask and the environment's turns between them unmarked, and the reward is the return the same
    actions get in a fresh environment."""
    from gpu_arena.training.grpo import GRPORun, build_trainer
    from gpu_arena.training.presets import load_pretrained

    model, tok = load_pretrained(scripted)
    run = GRPORun(output_dir=str(tmp_path / "out"), model=str(scripted), preset="tiny", max_steps=2,
                  num_generations=2, seeds=(5, 6, 7), constrained=constrained, max_turn_tokens=40).resolved()
    assert run.rollouts == "engine"
    trainer = build_trainer(run, model, tok)
    seen: list[tuple[float, dict[str, Any]]] = []
    calculate = trainer._calculate_rewards
    generate = trainer._generate
    between = [0]  # environment ids between the model's replies (an episode may end at its first move)

    def capture(inputs: Any, prompts: Any, completions: Any, ids: Any) -> Any:
        per_func = calculate(inputs, prompts, completions, ids)
        weights = trainer.reward_weights.to(per_func.device)
        for i, row in enumerate(inputs):
            seen.append((float((per_func[i] * weights).nansum()), row))
        return per_func

    def check_generate(prompts: Any) -> Any:
        out = generate(prompts)
        prompt_ids, completion_ids, mask = out[0], out[1], out[2]
        assert len(completion_ids) == len(prompts) and mask is not None
        for p, c, m in zip(prompt_ids, completion_ids, mask, strict=True):
            assert len(c) == len(m) and 0 < sum(m) <= len(m)  # the model's replies and the turns between them
            between[0] += len(m) - sum(m)
            text = tok.decode([t for t, k in zip(c, m, strict=True) if k], skip_special_tokens=True)
            assert "<tool_call>" in text and "Round" not in text  # no environment text under the mask
            if not constrained:  # the scripted model's one reply (under the grammar: what the grammar allows)
                assert text.count("allocate_to_job") == text.count("<tool_call>")
            assert tok.decode(p).count("<|im_start|>") == 3  # system (with tools), first turn, generation prompt
        return out

    trainer._calculate_rewards = capture
    trainer._generate = check_generate
    trainer.train()
    trainer.rollout_func.close()
    assert len(seen) == 4 and between[0] > 0
    for reward, row in seen:
        world = {"task": row["task"], "split": row["split"], "seed": row["seed"]}
        assert row["seed"] in (5, 6, 7) and row["actions"]
        if constrained:  # every constrained reply is an action
            assert not any("rejected" in a for a in row["actions"])
        else:
            assert all(a.get("action_type") == "allocate_to_job" for a in row["actions"])
        assert reward == pytest.approx(row["episode_return"], abs=1e-6)  # the trainer sums rewards in float32
        assert reward == pytest.approx(replay_return(world, row["actions"]), abs=1e-6)
    assert trainer.reward_func_names == ["episode_return", *REWARD_COLUMNS, "valid_action_rate"]
    assert trainer.reward_weights.tolist() == [1.0] + [0.0] * (len(REWARD_COLUMNS) + 1)


def test_tool_env_in_process_and_against_a_server(tmp_path: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("send_message", {"message": "hello", "target_lab_id": "lab_1"}),
        ("send_offer", {"target_lab_id": "lab_1", "bogus": 1}),  # an unknown field: unreadable
    ]  # two calls, then the rollout stops: every task has at least three rounds
    world = {"task": "single_trade", "split": "holdout", "seed": 11}

    def play(env: ArenaToolEnv) -> tuple[float, list[dict[str, Any]], list[str]]:
        texts = [env.reset(**world, prompt=[{"role": "user", "content": ""}])]
        for name, args in calls:
            texts.append(getattr(env, name)(**args))
        return env.get_reward(), env.actions, texts

    local = ArenaToolEnv()
    r_local, acts_local, texts_local = play(local)
    assert acts_local[1]["rejected"] == "format_invalid_arguments"
    assert local.unfinished and local.format_errors >= 2  # the rest of the episode: format_no_action
    assert acts_local[-1]["rejected"] == "format_no_action"
    assert r_local == pytest.approx(replay_return(world, acts_local), abs=1e-9)
    assert local.turns == len(acts_local) and 0 < local.valid_turns < local.turns
    assert local.send_message(message="late") == EPISODE_OVER  # after the end: nothing is played
    assert local.turns == len(acts_local)

    with running_server(settings_for(tmp_path)) as url:
        remote = ArenaToolEnv(env_url=url)
        r_remote, acts_remote, texts_remote = play(remote)
        remote._backend.close()  # type: ignore[union-attr]
    # over the wire a format error is an action the rules refuse: same reward, the rules' code
    assert r_remote == pytest.approx(r_local, abs=1e-9)
    assert [a.get("action_type", "x") for a in acts_remote] == [a.get("action_type", "x") for a in acts_local]
    assert texts_remote[0] == texts_local[0] and texts_remote[1] == texts_local[1]
    assert "missing_field" in texts_remote[2] and "format_invalid_arguments" in texts_local[2]


def test_tool_env_shows_trl_only_the_actions() -> None:
    import inspect

    from transformers.utils import get_json_schema

    public = {n for n, _ in inspect.getmembers(ArenaToolEnv, predicate=inspect.isfunction) if not n.startswith("_")}
    assert public == {"reset", "get_reward", *ACTION_TYPES}
    env = ArenaToolEnv()
    schema = get_json_schema(env.send_offer)["function"]  # usable even without the exact tool list
    assert schema["name"] == "send_offer" and "target_lab_id" in schema["parameters"]["properties"]
    assert env.wait() == "No episode is running."


def test_trained_checkpoint_plays_tool_calls_as_in_training(scripted: Path) -> None:
    agent = make_policy(f"llm:hf:{scripted}?mode=tools")
    env = GpuArenaEnv(task="single_trade", split="holdout")
    obs = env.reset(seed=2)
    while not obs.done:
        obs = env.step(agent.act(obs))
    conv = agent.conversation("lab_0")  # type: ignore[attr-defined]
    assert conv is not None
    roles = [m["role"] for m in conv.transcript]
    assert roles[:3] == ["system", "user", "assistant"] and "tool" in roles and "user" not in roles[2:]
    calls = [m["tool_calls"][0]["function"] for m in conv.transcript if m.get("tool_calls")]
    assert calls and all(c == {"name": "allocate_to_job", "arguments": {}} for c in calls)
    assert agent.ledger.format_errors == 0  # type: ignore[attr-defined]


def test_train_commands_report_bad_input(tmp_path: Path, sft_data: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["train", "sft", "--data", str(tmp_path / "none"), "--output", str(tmp_path / "o")])
    assert res.exit_code != 0 and "no such file" in said(res)
    res = runner.invoke(app, ["train", "grpo", "--preset", "tiny", "--output", str(tmp_path / "g")])
    assert res.exit_code != 0 and "--model" in said(res)
    res = runner.invoke(app, ["train", "grpo", "--preset", "tiny", "--model", str(tmp_path), "--scale-rewards", "std",
                              "--output", str(tmp_path / "g")])
    assert res.exit_code != 0 and "unknown scale_rewards 'std'" in said(res)
    res = runner.invoke(app, ["train", "sft", "--preset", "huge", "--data", str(sft_data), "--output",
                              str(tmp_path / "h")])
    assert res.exit_code != 0 and "unknown preset" in said(res)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    res = runner.invoke(app, ["train", "sft", "--data", str(sft_data), "--output", str(tmp_path / "full")])
    assert res.exit_code != 0 and "not empty" in said(res)
    res = runner.invoke(app, ["runs", "show", "999", "--db", str(tmp_path / "a.db")])
    assert res.exit_code != 0 and "no training run" in said(res)


def test_run_log_reads_back_series(tmp_path: Path) -> None:
    from gpu_arena.training.runlog import RunLog

    log = RunLog(kind="grpo", config={"x": 1}, output_dir=tmp_path / "o", preset="tiny", model="m",
                 db=tmp_path / "a.db")
    log.log(1, {"loss": 0.5, "reward": float("nan"), "note": "text"})
    log.log(2, {"loss": 0.25, "reward": 0.1})
    log.finish("finished", {"final": {"reward": 0.1}})
    run = load_training_run(connect(tmp_path / "a.db"), log.run_id)
    assert run is not None and run["status"] == "finished" and run["config"] == {"x": 1}
    assert run["series"]["loss"] == {"step": [1, 2], "value": [0.5, 0.25]}
    assert run["series"]["reward"] == {"step": [2], "value": [0.1]}  # NaN stored as null, left out of the series
    assert run["metrics"][0]["note"] == "text" and run["n_logs"] == 2 and run["last_step"] == 2
    # readers work on a read-only connection (the dashboard's) and on a store without training tables
    ro = sqlite3.connect(f"file:{tmp_path / 'a.db'}?mode=ro", uri=True)
    assert [r["id"] for r in list_training_runs(ro)] == [log.run_id]
    assert load_training_run(ro, log.run_id) == run
    empty = sqlite3.connect(tmp_path / "empty.db")
    assert list_training_runs(empty) == [] and load_training_run(empty, 1) is None


def test_tiny_grpo_against_the_leagues_best(tmp_path: Path, scripted: Path) -> None:
    """`train grpo --opponents league:top2` with the tiny preset: the pool is the newest league's two
    best entrants, recorded with the run, and each world of the dataset plays one of them."""
    from gpu_arena.league import run_league

    db = str(tmp_path / "arena.db")
    table = run_league(["rule_expert", "no_negotiation", "random_valid"], ["single_trade"], 20, 0, db=db)
    best = [r["name"] for r in table["entrants"][:2]]
    out = tmp_path / "grpo"
    res = CliRunner().invoke(app, ["train", "grpo", "--preset", "tiny", "--model", str(scripted), "--output", str(out),
                                   "--steps", "1", "--generations", "2", "--seeds", "4", "--max-turn-tokens", "48",
                                   "--db", db, "--opponents", "league:top2"])
    assert res.exit_code == 0, res.output
    run = json.loads((out / "arena_training.json").read_text())["run"]
    assert run["opponents"] == "league:top2" and run["opponent_pool"] == best
    bad = CliRunner().invoke(app, ["train", "grpo", "--preset", "tiny", "--model", str(scripted), "--output",
                                   str(tmp_path / "g2"), "--steps", "1", "--db", str(tmp_path / "empty.db"),
                                   "--opponents", "league:top2"])
    assert bad.exit_code != 0 and "no league" in said(bad)
