"""LLM agents without a model: the shared loop (ledger, retries, episodes, errors) and the registry."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpu_arena import GpuArenaEnv
from gpu_arena.core.types import RejectedAction
from gpu_arena.evaluation.runner import play_episode
from gpu_arena.llm import ChatAgent, FormatError, LLMUnavailableError, OpenAICompatibleAgent, estimate_tokens
from gpu_arena.llm.agents import Completion, _TransientError
from gpu_arena.llm.testing import free_port
from gpu_arena.models import ArenaAction
from gpu_arena.policies import make_policy, policy_families, policy_names, register_policy_family


class Scripted(ChatAgent):
    """Answers from a list; an Exception instance in the list is raised instead."""

    def __init__(self, replies: list[Any], **kw: Any) -> None:
        super().__init__(**kw)
        self.replies = list(replies)
        self.requests: list[list[dict[str, Any]]] = []
        self.sleeps: list[float] = []
        self._sleep = self.sleeps.append

    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Completion:
        self.requests.append(messages)
        reply = self.replies.pop(0) if self.replies else Completion(content='{"action_type": "wait"}')
        if isinstance(reply, Exception):
            raise reply
        return reply


def test_loop_ledger_and_conversation_over_an_episode() -> None:
    agent = Scripted([Completion(content="no idea", prompt_tokens=100, completion_tokens=3),
                      Completion(content=None, tool_calls=[{"id": "a", "type": "function", "function": {
                          "name": "allocate_to_job", "arguments": "{}"}}], prompt_tokens=200, completion_tokens=9)],
                     mode="tools")
    env = GpuArenaEnv(task="single_trade", opponents="wait")
    obs = env.reset(seed=3)
    codes = []
    while not obs.done:
        obs = env.step(agent.act(obs))
        codes.append(obs.last_action_result.code)
    assert codes[0] == "format_no_action" and codes[1] == "ok"
    led = agent.ledger
    assert led.calls == len(codes) and led.format_errors == 1 and led.error_codes == {"format_no_action": 1}
    assert led.actions["allocate_to_job"] == 1 and led.actions["wait"] == len(codes) - 2
    # the third reply reported no usage: its tokens are estimated
    assert led.estimated_calls == len(codes) - 2 and led.prompt_tokens > 300
    assert led.overhead_s >= 0 and led.model_s >= 0 and led.retries == 0
    conv = agent.conversation("lab_0")
    assert conv is not None
    roles = [m["role"] for m in conv.transcript]
    assert roles[:6] == ["system", "user", "assistant", "user", "assistant", "tool"]  # tool result after the call
    assert "ERROR format_no_action" in conv.transcript[3]["content"]  # the model is told what went wrong
    d = led.to_dict()
    assert json.loads(json.dumps(d)) == d and d["format_error_rate"] == pytest.approx(1 / len(codes))


def test_a_new_episode_starts_a_new_conversation() -> None:
    agent = Scripted([], mode="json")
    env = GpuArenaEnv(task="single_trade", opponents="wait")
    for seed in (1, 2):
        obs = env.reset(seed=seed)
        while not obs.done:
            obs = env.step(agent.act(obs))
        conv = agent.conversation("lab_0")
        assert conv is not None and conv.transcript[1]["content"].startswith("[single_trade] Round 0/")
    assert agent.ledger.calls == sum(1 for r in agent.requests)  # ledgers accumulate across episodes


def test_transient_failures_are_retried_with_exponential_backoff() -> None:
    agent = Scripted([_TransientError("503"), _TransientError("timeout"), Completion(content='{"action_type": "finish"}')],
                     mode="json", max_retries=3, backoff_s=1.0, max_backoff_s=1.5, seed=0)
    env = GpuArenaEnv(task="single_trade", opponents="wait")
    action = agent.act(env.reset(seed=1))
    assert isinstance(action, ArenaAction) and action.action_type == "finish"
    assert agent.ledger.retries == 2 and len(agent.sleeps) == 2
    assert 0.5 <= agent.sleeps[0] <= 1.0 and 0.75 <= agent.sleeps[1] <= 1.5  # doubled, capped, jittered


@pytest.mark.parametrize("on_error", ["raise", "reject"])
def test_giving_up(on_error: str) -> None:
    agent = Scripted([_TransientError("down")] * 5, mode="json", max_retries=2, on_error=on_error)  # type: ignore[arg-type]
    obs = GpuArenaEnv(task="single_trade").reset(seed=1)
    if on_error == "raise":
        with pytest.raises(LLMUnavailableError, match="3 attempts"):
            agent.act(obs)
    else:
        out = agent.act(obs)
        assert isinstance(out, RejectedAction) and not isinstance(out, FormatError) and out.code == "llm_unavailable"
    assert agent.ledger.failures == 1 and agent.ledger.retries == 2


def test_unreachable_endpoint_fails_after_retries() -> None:
    port = free_port()  # nothing listens there
    agent = OpenAICompatibleAgent(f"http://127.0.0.1:{port}/v1", "tiny", mode="json", timeout=2, max_retries=2,
                                  backoff_s=0.01)
    obs = GpuArenaEnv(task="single_trade").reset(seed=1)
    with pytest.raises(LLMUnavailableError):
        agent.act(obs)
    assert agent.ledger.retries == 2 and agent.ledger.failures == 1
    # as an opponent, the environment turns the failure into that seat's policy_error, never a crash
    env = GpuArenaEnv(task="single_trade", opponents=f"llm:openai:tiny@http://127.0.0.1:{port}/v1?max_retries=0")
    obs = env.reset(seed=1)
    obs = env.step(ArenaAction(action_type="wait"))
    assert env.episode is not None and env.episode.last_results["lab_1"].code == "policy_error"


def test_registry_resolves_llm_names() -> None:
    a = make_policy("llm:openai:org/model-7b@http://127.0.0.1:1/v1?mode=json&temperature=0.7&max_tokens=64"
                    "&max_turns=3&timeout=5", seed=11, margin=0.3)
    assert isinstance(a, OpenAICompatibleAgent)
    assert (a.model, a.base_url, a.mode, a.temperature, a.max_tokens, a.max_turns, a.timeout, a.seed) == (
        "org/model-7b", "http://127.0.0.1:1/v1", "json", 0.7, 64, 3, 5.0, 11)
    b = make_policy("llm:openai:m@http://127.0.0.1:1/v1?seed=5", seed=11)
    assert b.seed == 5  # type: ignore[attr-defined]
    assert "llm" in policy_families() and not any(":" in n for n in policy_names())
    for bad, match in [("llm:openai:m@http://x?colour=red", "unknown option"), ("llm:openai:@http://x", "no model"),
                       ("llm:vertex:m", "unknown LLM backend"), ("llm:openai:m@http://x?temperature=hot", "not a number"),
                       ("llm:openai:m@http://x?mode=yaml", "mode")]:
        with pytest.raises(ValueError, match=match):
            make_policy(bad)


def test_registry_families_are_pluggable() -> None:
    register_policy_family("echo-test", lambda rest, **kw: Scripted([Completion(content=rest)], mode="json"))
    with pytest.raises(ValueError, match="already registered"):
        register_policy_family("echo-test", lambda rest, **kw: None)  # type: ignore[arg-type,return-value]
    agent = make_policy('echo-test:{"action_type": "finish"}')
    res = play_episode("rule_expert", "single_trade", "train", 4, opponents={"lab_1": agent})
    assert res.steps >= 1


def test_agent_overhead_per_step_is_small() -> None:
    """The agent's own work per step (render, parse, bookkeeping), excluding the model."""
    agent = Scripted([], mode="tools")
    env = GpuArenaEnv(task="coalition_market", opponents="wait")
    for seed in range(3):
        obs = env.reset(seed=seed)
        while not obs.done:
            obs = env.step(agent.act(obs))
    per_call_ms = agent.ledger.to_dict()["overhead_ms_per_call"]
    assert per_call_ms < 50, per_call_ms
    assert estimate_tokens(agent.requests[-1][-1]["content"]) > 100


def test_play_command_human_and_scripted_seats() -> None:
    from typer.testing import CliRunner

    from gpu_arena.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["play", "--task", "single_trade", "--seed", "2", "--opponents", "rule_expert"],
                        input="launch\n{\"action_type\": \"wait\"}\nallocate_to_job\nfinish\n")
    assert out.exit_code == 0, out.output
    assert "[single_trade] Round 0/" in out.output and "format_unknown_action" in out.output
    assert "return" in out.output and "welfare" in out.output
    out = runner.invoke(app, ["play", "--task", "market_round", "--seed", "1", "--me", "rule_expert",
                              "--opponents", "lab_1=selfish,lab_2=random_valid"])
    assert out.exit_code == 0, out.output
    assert "selfish" in out.output and "random_valid" in out.output
    out = runner.invoke(app, ["play", "--opponents", "a,b,c,d"])
    assert out.exit_code != 0 and "opponents" in out.output
