"""Real models: a real OpenAI-compatible server (`transformers serve` on 127.0.0.1) and local
checkpoints, both backed by tiny models built here (random init, tokenizer trained on the fly).

A random model babbles: every reply must become a format error, never a crash. Scripted models
(weights set so greedy decoding emits one fixed reply) check that valid actions, server-parsed
tool calls and malformed JSON travel the whole way: model -> server -> agent -> environment.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_arena import GpuArenaEnv
from gpu_arena.evaluation.runner import play_episode
from gpu_arena.llm import FormatError, OpenAICompatibleAgent, TransformersAgent
from gpu_arena.llm.agents import trained_prompt_mode
from gpu_arena.llm.testing import build_tiny_model, serve
from gpu_arena.models import ArenaAction
from gpu_arena.policies import make_policy

pytest.importorskip("transformers")

SCRIPTS = {
    "random": None,
    "json": '{"action_type": "allocate_to_job"}',
    "tool": '<tool_call>{"name": "allocate_to_job", "arguments": {}}</tool_call>',
    "malformed": '```json\n{"action_type": "send_offer", "payment": 12,\n```',
    "verdict": '{"lab_0": {"score": 9, "reason": "states its hours and deadline"}, "lab_1": {"score": 2, "reason": "vague"}}',
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("tiny")
    return {name: str(build_tiny_model(root / name, script=script)) for name, script in SCRIPTS.items()}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with serve(log_path=str(log)) as url:
        yield url


def play(env: GpuArenaEnv, agent: Any, seed: int) -> list[Any]:
    obs = env.reset(seed=seed)
    actions = []
    while not obs.done:
        action = agent.act(obs)
        actions.append(action)
        obs = env.step(action)
        res = obs.last_action_result
        if isinstance(action, FormatError):
            assert (res.ok, res.code) == (False, action.code)
            assert obs.reward_breakdown["invalid_action_penalty"] == pytest.approx(-0.01)
    return actions


@pytest.mark.parametrize("mode", ["tools", "json"])
def test_random_model_plays_a_whole_episode_through_the_server(models: dict[str, str], server: str, mode: str) -> None:
    agent = OpenAICompatibleAgent(server, models["random"], mode=mode, max_tokens=24, timeout=60, seed=0,  # type: ignore[arg-type]
                                  max_turns=2)
    env = GpuArenaEnv(task="market_round", opponents="archetypes")
    actions = play(env, agent, seed=5)
    assert len(actions) == env.state.max_rounds
    assert all(isinstance(a, ArenaAction | FormatError) for a in actions)
    assert any(isinstance(a, FormatError) for a in actions)  # a random model mostly babbles
    led = agent.ledger
    assert led.calls == len(actions) and led.failures == 0 and led.retries == 0
    assert led.estimated_calls == 0  # the server reports usage
    assert led.prompt_tokens > 1000 * led.calls and 0 < led.completion_tokens <= 24 * led.calls
    assert led.model_s > 0 and led.max_call_s > 0
    assert led.format_errors == sum(isinstance(a, FormatError) for a in actions)


def test_scripted_models_play_valid_actions_in_both_modes(models: dict[str, str], server: str) -> None:
    for mode, model in (("tools", models["tool"]), ("json", models["json"])):
        agent = OpenAICompatibleAgent(server, model, mode=mode, max_tokens=16, timeout=60)  # type: ignore[arg-type]
        env = GpuArenaEnv(task="single_trade", opponents="wait")
        obs = env.reset(seed=2)
        obs = env.step(agent.act(obs))
        assert obs.last_action_result.ok, obs.last_action_result
        assert agent.ledger.actions == {"allocate_to_job": 1}
        assert obs.owned_blocks and any(b.status == "allocated" for b in obs.owned_blocks)
        agent.act(obs)
        conv = agent.conversation("lab_0")
        assert conv is not None
        if mode == "tools":  # the server parsed the <tool_call> into a real tool call; we answered it
            call = conv.transcript[2]["tool_calls"][0]
            assert call["function"]["name"] == "allocate_to_job"
            assert conv.transcript[3]["role"] == "tool" and conv.transcript[3]["tool_call_id"] == call["id"]
        else:
            assert conv.transcript[2]["content"] == SCRIPTS["json"]


def test_malformed_completion_is_a_format_error_with_the_penalty(models: dict[str, str], server: str) -> None:
    agent = OpenAICompatibleAgent(server, models["malformed"], mode="json", max_tokens=16, timeout=60)
    env = GpuArenaEnv(task="single_trade", opponents="wait")
    obs = env.reset(seed=1)
    action = agent.act(obs)
    assert isinstance(action, FormatError) and action.code == "format_invalid_json"
    obs = env.step(action)
    assert obs.last_action_result.code == "format_invalid_json"
    assert obs.reward_breakdown["invalid_action_penalty"] == pytest.approx(-0.01)
    assert env.episode is not None and env.episode.world.labs["lab_0"].invalid_actions == 1


def test_llm_opponents_and_self_play_in_the_harness(models: dict[str, str], server: str) -> None:
    # an LLM opponent against rule_expert, by name, through the evaluation harness
    name = f"llm:openai:{models['json']}@{server}?mode=json&max_tokens=16"
    res = play_episode("rule_expert", "market_round", "train", 3, opponents={"lab_1": name}, keep_replay=True)
    assert res.replay is not None
    played = [r["actions"]["lab_1"] for r in res.replay["transcript"]]
    assert played and all(a == {"action_type": "allocate_to_job"} for a in played)
    # self-play: every seat an LLM, each with its own view and conversation
    env = GpuArenaEnv(task="market_round", opponents=[name.replace("json&", "json&seed=1&"), name])
    me = make_policy(f"llm:openai:{models['tool']}@{server}?max_tokens=16")
    actions = play(env, me, seed=4)
    assert all(isinstance(a, ArenaAction) and a.action_type == "allocate_to_job" for a in actions)
    assert env.episode is not None and env.episode.done
    for lid in ("lab_1", "lab_2"):
        assert env.episode.world.labs[lid].invalid_actions == 0


def test_concurrent_episodes_share_the_server(models: dict[str, str], server: str) -> None:
    errors: list[BaseException] = []
    ledgers = []

    def run(seed: int) -> None:
        try:
            agent = OpenAICompatibleAgent(server, models["random"] if seed % 2 else models["json"], mode="json",
                                          max_tokens=12, timeout=120, max_turns=1)
            play(GpuArenaEnv(task="single_trade", opponents="wait"), agent, seed)
            ledgers.append(agent.ledger)
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    assert len(ledgers) == 4 and all(led.calls >= 3 and led.failures == 0 for led in ledgers)


def test_a_trained_checkpoint_is_prompted_in_the_mode_it_learned(models: dict[str, str], tmp_path: Any) -> None:
    """Without ``mode``, a checkpoint gpu_arena.training saved is prompted in its recorded mode
    (a tools-trained model asked in json mode reads a prompt it never saw); others in json."""
    import json
    import shutil

    trained = tmp_path / "trained"
    shutil.copytree(models["tool"], trained)
    (trained / "arena_training.json").write_text(json.dumps({"kind": "sft", "preset": {"prompt_mode": "tools"}}))
    assert trained_prompt_mode(trained) == "tools"
    assert make_policy(f"llm:hf:{trained}").mode == "tools"  # type: ignore[attr-defined]
    assert make_policy(f"llm:hf:{trained}?mode=json").mode == "json"  # type: ignore[attr-defined]
    assert trained_prompt_mode(models["tool"]) is None
    assert TransformersAgent(models["tool"]).mode == "json"
    for record in ('{"preset": {"prompt_mode": "yaml"}}', '{"preset": null}', "not json"):
        (trained / "arena_training.json").write_text(record)
        assert trained_prompt_mode(trained) is None


def test_transformers_agent_on_a_local_checkpoint(models: dict[str, str]) -> None:
    agent = TransformersAgent(models["json"], max_new_tokens=16)
    env = GpuArenaEnv(task="single_trade", opponents="archetypes")
    actions = play(env, agent, seed=6)
    assert all(isinstance(a, ArenaAction) and a.action_type == "allocate_to_job" for a in actions)
    led = agent.ledger
    assert led.estimated_calls == 0 and led.completion_tokens == 2 * led.calls  # the script token + end of turn
    conv = agent.conversation("lab_0")
    assert conv is not None
    tok = agent._tokenizer
    first = tok.apply_chat_template(conv.transcript[:2], add_generation_prompt=True, return_dict=False)
    assert led.prompt_tokens > len(first)  # exact counts: the first prompt is a prefix of the sum

    babbler = make_policy(f"llm:hf:{models['random']}?max_tokens=20&mode=tools", seed=3)
    assert isinstance(babbler, TransformersAgent) and babbler.mode == "tools"
    actions = play(GpuArenaEnv(task="single_trade", opponents="wait"), babbler, seed=6)
    assert any(isinstance(a, FormatError) for a in actions)
    sampled = TransformersAgent(models["random"], max_new_tokens=8, temperature=1.0, seed=7)
    again = TransformersAgent(models["random"], max_new_tokens=8, temperature=1.0, seed=7)
    obs = GpuArenaEnv(task="single_trade").reset(seed=1)
    first_reply = (sampled.act(obs), sampled.conversation("lab_0").transcript[-1]["content"])  # type: ignore[union-attr]
    second_reply = (again.act(obs), again.conversation("lab_0").transcript[-1]["content"])  # type: ignore[union-attr]
    assert first_reply[1] == second_reply[1]  # seeded sampling is reproducible
    assert Path(models["json"], "config.json").exists()


def test_play_command_with_llm_seats(models: dict[str, str]) -> None:
    from typer.testing import CliRunner

    from gpu_arena.cli import app

    hf = f"llm:hf:{models['json']}?max_tokens=8"
    out = CliRunner().invoke(app, ["play", "--task", "single_trade", "--seed", "3", "--me", hf,
                                   "--opponents", f"llm:hf:{models['random']}?max_tokens=8"])
    assert out.exit_code == 0, out.output
    assert "lab_0 says" in out.output and "LLM ledgers" in out.output and "allocate_to_job" in out.output


def test_llm_judge_through_the_server(models: dict[str, str], server: str) -> None:
    """The judge is a real model behind the real server; the truth checks and the bound still rule."""
    from test_llm_judge import FALSE, NONE, TRUE, judged_world

    from gpu_arena.core.engine import Episode
    from gpu_arena.llm.judge import LLMJudge

    judge = LLMJudge(server, models["verdict"], max_tokens=64, timeout=60)
    # equally true pitches: the rule judge ties them (the higher bid, lab_1, would win); the model picks lab_0
    w, _ = judged_world(TRUE, TRUE, bid_0=3.0, bid_1=5.0)
    ep = Episode(w, controlled=(), judge=judge)
    ep.step({})
    ep.step({})
    a = w.auctions["a_1"]
    assert a.winner == "lab_0"
    assert f"judge {judge.name} 9.0/10, +0.080: states its hours and deadline" in a.pitches["lab_0"].reasons
    assert ep.transcript[1]["judge"]["a_1"]["scores"] == {"lab_0": 0.9, "lab_1": 0.2}
    # a lie still loses to no claim although the model scores the liar 9 and the other 2
    w, _ = judged_world(FALSE, NONE)
    ep = Episode(w, controlled=(), judge=judge)
    ep.step({})
    ep.step({})
    assert w.auctions["a_1"].winner == "lab_1"
    led = judge.ledger
    assert led.calls == 2 and led.failures == 0 and led.format_errors == 0 and led.estimated_calls == 0
    assert led.prompt_tokens > 200 and led.model_s > 0
    # a babbling model: its verdict is malformed, the rule judge decides alone and says why
    babbler = LLMJudge(server, models["random"], max_tokens=24, timeout=60)
    w, _ = judged_world(TRUE, NONE)
    ep = Episode(w, controlled=(), judge=babbler)
    ep.step({})
    ep.step({})
    assert w.auctions["a_1"].winner == "lab_0"
    assert "fallback" in ep.transcript[1]["judge"]["a_1"] and babbler.ledger.format_errors == 1
    assert w.auctions["a_1"].pitches["lab_1"].reasons[-1].endswith("rule judge only")


def test_eval_with_an_llm_opponent_and_an_llm_judge_records_the_ledgers(models: dict[str, str], server: str,
                                                                      tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from gpu_arena.cli import app
    from gpu_arena.evaluation.replay import read_jsonl, replay_episode
    from gpu_arena.evaluation.store import connect, latest_run, load_usage

    opponent = f"llm:openai:{models['json']}@{server}?mode=json&max_tokens=16"
    judge = f"llm:openai:{models['verdict']}@{server}?max_tokens=64"
    out, db, replays = tmp_path / "r.json", tmp_path / "a.db", tmp_path / "replays.jsonl"
    res = CliRunner().invoke(app, ["eval", "--policies", "rule_expert", "--tasks", "single_trade", "--seeds", "1",
                                   "--seed-start", "1", "--split", "train", "--workers", "1", "--opponents", opponent,
                                   "--judge", judge, "--out", str(out), "--db", str(db), "--replays", str(replays)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["args"]["opponents"] == opponent and data["args"]["judge"] == judge
    rows = {r["role"]: r for r in data["llm_usage"]}
    record = next(read_jsonl(replays))
    steps = len(record["transcript"])  # one opponent call per round
    opp = rows["opponent"]
    assert opp["agent"] == f"llm:openai:{models['json']}@{server}" and opp["calls"] == steps
    assert opp["format_errors"] == 0 and opp["failures"] == 0 and opp["prompt_tokens"] > 500 * steps
    assert rows["judge"]["calls"] >= 1 and rows["judge"]["format_errors"] == 0
    run = latest_run(connect(db))
    assert run is not None and load_usage(connect(db), run["id"]) == data["llm_usage"]
    assert all(a == {"action_type": "allocate_to_job"} for r in record["transcript"] for a in [r["actions"]["lab_1"]])
    assert any("judge" in r for r in record["transcript"])
    assert replay_episode(record).transcript == record["transcript"]  # the recorded verdict replays without the model
    assert "LLM ledgers" in res.output

