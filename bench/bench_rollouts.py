"""The rollout engine's environment side against the loop before it, as one JSON line.

Run: ``make bench`` (or ``python bench/bench_rollouts.py [--quick]``).

Generation is replaced by a scripted answerer that writes ``rule_expert``'s move as a model would
(the tool-call text of the chat template, tokenized, its end token after it), so what is measured
is everything else a turn costs: stepping the environment and its opponents, rendering and
tokenizing the prompt, building the seat's action grammar and its matcher, reading the reply.
Prompts and grammars are built exactly as for a model (``small`` preset tokenizer, trained here on
teacher chats; constrained decoding). The answerer's own CPU time (the policy's move, its
tokenization) is measured and taken out on both sides.

* ``env_side_cpu_ms_per_turn``: CPU seconds per turn, this process and the workers together, for
  the loop before the engine (``before``, :mod:`rollouts_before`) and the engine (inline workers
  and one worker process), per task. All play the same episodes (their mean returns are printed
  and must agree). The engine checks a greedy reply against its turn's grammar without compiling
  it and compiles only for the replies that do not fit (``checked``/``redone``: the scripted
  moves nearly always fit; decision 0033 measures a trained model's share);
  ``engine_1_worker_grammar_every_turn`` compiles every turn's grammar, as the engine did before.
* ``env_side_speedup``: per task, before's CPU per turn over the engine's (one worker process,
  the way the training runs it). Target: at least 5 on single_trade and market_round (issue 31).
* ``scaling``: environment-side turns/s (wall) with 1, 2 and 4 worker processes and with Ray
  actors on this node (two), on market_round: the curve, no target on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

TASKS = ("single_trade", "market_round")
SEED_START = 5000


def build_tokenizer() -> Any:
    """The ``small`` preset's tokenizer, trained on rule_expert chats as the pipeline trains it."""
    from gpu_arena.training.data import play_episode_record
    from gpu_arena.training.presets import corpus_for_tokenizer, get_preset, train_tokenizer

    records = [play_episode_record("rule_expert", task, "train", s).to_json()
               for task in ("single_trade", "market_round", "coalition_market") for s in range(16)]
    spec = get_preset("small").model
    assert spec is not None
    return train_tokenizer(corpus_for_tokenizer(records), spec.vocab_size)


def reply_ids(tok: Any, answer: tuple[str, Any, int]) -> list[int]:
    """A move's tool call as the model writes it: the template's own text for the call (what the
    action grammar allows), then the end token."""
    from gpu_arena.rollouts.chat import encode

    content, calls, _ = answer
    fn = calls[0]["function"]
    text = '<tool_call>\n{"name": "' + fn["name"] + '", "arguments": ' + json.dumps(fn["arguments"]) + "}\n</tool_call>"
    return [*encode(tok, content + text), int(tok.eos_token_id)]


class _Model:
    """A stand-in for ``model.generate`` in the loop before: each row's reply is the scripted
    move registered for its grammar object."""

    def __init__(self, tok: Any) -> None:
        import torch

        self.tok = tok
        self.device = torch.device("cpu")
        self.training = False
        self.replies: dict[int, list[int]] = {}

    def eval(self) -> None:
        pass

    def generate(self, input_ids: Any, attention_mask: Any, logits_processor: Any = None, **kwargs: Any) -> Any:
        import torch

        rows = [self.replies[id(g)] for g in logits_processor[0].grammars]
        width = max(len(r) for r in rows)
        out = torch.full((input_ids.shape[0], input_ids.shape[1] + width), int(self.tok.pad_token_id),
                         dtype=torch.long)
        out[:, :input_ids.shape[1]] = input_ids
        for i, r in enumerate(rows):
            out[i, input_ids.shape[1]:input_ids.shape[1] + len(r)] = torch.tensor(r, dtype=torch.long)
        return out


def warm_worlds(worlds: list[Any]) -> list[Any]:
    """Eight worlds of the same task outside the measured range, played first by every loop: a
    long run pays imports, template compilation and cold caches once, not per turn."""
    from gpu_arena.rollouts import World

    return [World(worlds[0].task, worlds[0].split, SEED_START - 100 + k) for k in range(8)]


def cold_caches(tok: Any) -> None:
    """Forget the grammar rules and matchers this process compiled (the engine keeps them across
    runs; without this, a run after another would start warm)."""
    from gpu_arena.llm import constrain, matching

    constrain._action_rule.cache_clear()
    constrain._SEAT_GRAMMARS.clear()
    if hasattr(tok, matching._MATCHERS_ATTR):
        delattr(tok, matching._MATCHERS_ATTR)


def run_before(tok: Any, worlds: list[Any]) -> dict[str, Any]:
    from gpu_arena.core.policy import seat_view
    from gpu_arena.llm.tools import render_reply
    from gpu_arena.native.report import engine_counts
    from gpu_arena.policies import make_policy
    from rollouts_before import LoopBefore

    model = _Model(tok)
    answerer = [0.0]

    class Loop(LoopBefore):
        def grammars(self, envs: Any) -> Any:
            grammars = super().grammars(envs)
            t0 = time.process_time()
            for env, g in zip(envs, grammars or [], strict=True):
                policy = make_policy("rule_expert", seed=0)
                content, calls = render_reply(policy.act(seat_view(policy, env.episode, self.seat)), "tools", "call_0")
                model.replies[id(g)] = reply_ids(tok, (content, calls, 0))
            answerer[0] += time.process_time() - t0
            return grammars

    Loop(model, tok, constrained=True).play(warm_worlds(worlds))  # imports, template, caches: as in a long run
    answerer[0] = 0.0
    loop = Loop(model, tok, constrained=True)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    rollouts = loop.play(worlds)
    cpu, wall = time.process_time() - cpu0 - answerer[0], time.perf_counter() - wall0
    return {"turns": loop.turns, "cpu_ms_per_turn": 1000 * cpu / loop.turns, "turns_per_s": loop.turns / wall,
            "answerer_ms_per_turn": 1000 * answerer[0] / loop.turns,
            "mean_return": statistics.fmean(r.episode_return for r in rollouts),
            "valid_rate": sum(r.valid_turns for r in rollouts) / loop.turns,
            "engines": engine_counts((r.engine, r.engine_reason) for r in rollouts)}


class ScriptedBackend:
    """A generation backend whose replies are rule_expert's moves, asked of the workers that hold
    the episodes (the engine tells it which episode each prompt is). A prompt asked again (a
    greedy reply checked and decoded again under its grammar) gets the move it got first."""

    name = "scripted"
    constrained = True
    returns_ids = True

    def __init__(self, tok: Any) -> None:
        from gpu_arena.rollouts import GenerationStats

        self.tok = tok
        self.stats = GenerationStats()
        self.pool: Any = None
        self.keys: list[int] = []
        self.answerer_cpu = 0.0
        self.moves: dict[int, list[int]] = {}  # id(prompt) -> the reply it got this round (the engine's call)

    def generate(self, prompts: Any, *, grammars: Any = None, **kwargs: Any) -> list[list[int] | str]:
        from gpu_arena.llm.constrain import ActionGrammar
        from gpu_arena.llm.matching import GrammarConstraint

        if grammars is not None:  # the matchers a model's decoding would start from, as TransformersBackend builds them
            GrammarConstraint(self.tok, [None if g is None else ActionGrammar(g[0], (), g[1]) for g in grammars],
                              max(len(p) for p in prompts))
        if all(id(p) in self.moves for p in prompts):  # asked again: the same moves
            return [self.moves[id(p)] for p in prompts]
        moves = self.pool.propose([(k, "rule_expert", 0) for k in self.keys]).wait()
        t0 = time.process_time()
        out: list[list[int] | str] = [reply_ids(self.tok, m) for m in moves]
        self.moves = {id(p): r for p, r in zip(prompts, out, strict=True)}
        self.answerer_cpu += time.process_time() - t0
        return out


def run_engine(tok: Any, worlds: list[Any], workers: int, backend: str = "process",
               check_first: bool = True) -> dict[str, Any]:
    from gpu_arena.native.report import engine_counts
    from gpu_arena.rollouts import RolloutEngine, SessionConfig, WorkerPool
    from gpu_arena.training.rollouts import chat_mode

    scripted = ScriptedBackend(tok)

    class Engine(RolloutEngine):
        def generate(self, flight: Any, rows: Any, temperature: float, seed: int, repeat: int = 1) -> Any:
            scripted.keys = [flight.keys[i] for i in rows for _ in range(repeat)]
            scripted.moves = {}  # a new round: the prompts (lists extended in place) get new moves
            return super().generate(flight, rows, temperature, seed, repeat)

    cold_caches(tok)  # every run compiles its own grammars and matchers (its warm-up, below, warms them)
    config = SessionConfig(tok, constrained=True, chat_mode=chat_mode(tok))
    with WorkerPool(config, workers, backend) as pool:
        scripted.pool = pool
        engine = Engine(scripted, pool, temperature=0.0, batch_size=len(worlds), check_first=check_first)
        engine.play(warm_worlds(worlds))  # imports, template, caches: as in a long run
        engine.checked = engine.redone = 0
        scripted.answerer_cpu = 0.0
        pool.method_cpu.clear()
        rollouts, stats = engine.play(worlds)
        # the policy's moves (in the workers, or in this process when inline), timed apart
        proposing = pool.method_cpu.get("propose", 0.0)
    cpu = stats.main_cpu_seconds + stats.worker_cpu_seconds - scripted.answerer_cpu - proposing
    return {"turns": stats.turns, "cpu_ms_per_turn": 1000 * cpu / stats.turns, "turns_per_s": stats.turns_per_s,
            "main_cpu_ms_per_turn": 1000 * (stats.main_cpu_seconds - scripted.answerer_cpu) / stats.turns,
            "mean_return": statistics.fmean(r.episode_return for r in rollouts),
            "valid_rate": sum(r.valid_turns for r in rollouts) / stats.turns,
            "engine": sorted({r.engine for r in rollouts}), "chat_mode": config.chat_mode,
            # how many episodes each engine played, and why the Python core played any
            "engines": engine_counts((r.engine, r.engine_reason) for r in rollouts),
            # greedy replies checked against their grammar without compiling it, and decoded again
            "check_first": check_first, "checked": engine.checked, "redone": engine.redone}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="256 worlds a task instead of 1024")
    parser.add_argument("--worlds", type=int, default=None, help="worlds a task (overrides --quick)")
    parser.add_argument("--no-scaling", action="store_true", help="leave out the workers/Ray curve")
    args = parser.parse_args()
    from gpu_arena.rollouts import World

    n = args.worlds or (256 if args.quick else 1024)
    t0 = time.perf_counter()
    tok = build_tokenizer()
    out: dict[str, Any] = {"bench": "rollouts", "worlds_per_task": n, "tokenizer_vocab": len(tok), "tasks": {}}
    speedup: dict[str, float] = {}
    for task in TASKS:
        worlds = [World(task, "train", SEED_START + k) for k in range(n)]
        before = run_before(tok, worlds)
        inline = run_engine(tok, worlds, 0)
        process = run_engine(tok, worlds, 1)
        every_turn = run_engine(tok, worlds, 1, check_first=False)  # the grammar compiled on every turn
        out["tasks"][task] = {"before": before, "engine_inline": inline, "engine_1_worker": process,
                              "engine_1_worker_grammar_every_turn": every_turn}
        speedup[task] = round(before["cpu_ms_per_turn"] / process["cpu_ms_per_turn"], 2)
        if max(abs(before["mean_return"] - r["mean_return"]) for r in (inline, process, every_turn)) > 1e-9:
            out.setdefault("warnings", []).append(f"{task}: the loops played different episodes")
    out["env_side_cpu_ms_per_turn"] = {t: {"before": round(v["before"]["cpu_ms_per_turn"], 3),
                                           "engine_inline": round(v["engine_inline"]["cpu_ms_per_turn"], 3),
                                           "engine_1_worker": round(v["engine_1_worker"]["cpu_ms_per_turn"], 3),
                                           "engine_1_worker_grammar_every_turn":
                                               round(v["engine_1_worker_grammar_every_turn"]["cpu_ms_per_turn"], 3)}
                                       for t, v in out["tasks"].items()}
    out["env_side_speedup"] = speedup
    out["env_side_speedup_target"] = 5.0
    if not args.no_scaling:
        worlds = [World("market_round", "train", SEED_START + k) for k in range(n)]
        curve: dict[str, float] = {}
        for workers in (1, 2, 4):
            curve[f"process_{workers}"] = round(run_engine(tok, worlds, workers)["turns_per_s"], 1)
        try:
            curve["ray_2"] = round(run_engine(tok, worlds, 2, "ray")["turns_per_s"], 1)
        except Exception as e:  # Ray missing or refusing to start here: the curve says so
            curve["ray_2"] = float("nan")
            out.setdefault("warnings", []).append(f"ray: {type(e).__name__}: {e}")
        out["scaling_turns_per_s"] = {"task": "market_round", **curve}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
