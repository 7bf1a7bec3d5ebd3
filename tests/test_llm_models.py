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
from gpu_arena.llm.testing import build_tiny_model, serve
from gpu_arena.models import ArenaAction
from gpu_arena.policies import make_policy

pytest.importorskip("transformers")

SCRIPTS = {
    "random": None,
    "json": '{"action_type": "allocate_to_job"}',
    "tool": '<tool_call>{"name": "allocate_to_job", "arguments": {}}</tool_call>',
    "malformed": '```json\n{"action_type": "send_offer", "payment": 12,\n```',
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
