"""Evaluating checkpoints: batched holdout episodes of a local model, as evaluation rows; turn-level
statistics of recorded episodes (how often a seat's action was accepted, how often the model's
output could not be read at all, by code).

:func:`evaluate_checkpoint` plays ``llm:hf:DIR?mode=tools`` greedily through the batched sampler
(:mod:`gpu_arena.training.rollouts`: one ``generate`` per round for every episode, the same chat
template, parser and environment as the agent) and returns the evaluation harness's own rows. The
pipeline's evaluation of 2 checkpoints on 2 tasks x 200 seeds took over 28 minutes one episode at a
time in 2 worker processes; batched, a task's 200 episodes take under a minute.

The evaluation table's ``invalid_rate`` counts actions the rules refused *and* unreadable output
together (same-round conflicts excepted); this splits them, from the replays that
``gpu-arena eval --replays`` writes.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..evaluation import EpisodeResult
    from ..evaluation.runner import Optima


def _records(source: str | Path | Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    if isinstance(source, str | Path):
        from ..evaluation.replay import read_jsonl

        return read_jsonl(str(source))
    return source


def turn_stats(source: str | Path | Iterable[dict[str, Any]], seat: str = "lab_0") -> list[dict[str, Any]]:
    """Per (policy, task, split): ``episodes``, ``turns`` (rounds the seat acted in), ``accepted``
    (its action went through), ``valid_rate`` = accepted / turns, ``format_errors`` (unreadable
    output: ``rejected`` codes starting ``format_``), ``format_error_rate``, ``rule_errors`` (the
    rules refused a readable action, conflicts included) and ``codes`` (every refusal code, counted)."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for i, rec in enumerate(_records(source)):
        try:
            key = (str(rec.get("policy")), str(rec.get("task")), str(rec.get("split")))
            g = groups.setdefault(key, {"episodes": 0, "turns": 0, "accepted": 0, "format_errors": 0,
                                        "rule_errors": 0, "codes": Counter()})
            g["episodes"] += 1
            for rnd in rec.get("transcript") or []:
                action = (rnd.get("actions") or {}).get(seat)
                if action is None:
                    continue  # a finished seat waits without acting
                g["turns"] += 1
                ok, code = (rnd.get("results") or {}).get(seat, [True, "ok"])
                rejected = action.get("rejected")
                if ok:
                    g["accepted"] += 1
                elif isinstance(rejected, str) and rejected.startswith("format_"):
                    g["format_errors"] += 1
                    g["codes"][rejected] += 1
                else:
                    g["rule_errors"] += 1
                    g["codes"][str(code)] += 1
        except (AttributeError, TypeError, ValueError) as e:  # a record of another shape
            raise ValueError(f"record {i} is not an episode replay: {e}") from None
    rows = []
    for (policy, task, split), g in groups.items():
        n = max(g["turns"], 1)
        rows.append({"policy": policy, "task": task, "split": split, **g, "codes": dict(g["codes"]),
                     "valid_rate": g["accepted"] / n, "format_error_rate": g["format_errors"] / n})
    return rows


# episodes in flight: a coalition_market conversation reaches 3,400 tokens by its last turn; 200 of them
# outgrew the kept caches' budget, and one row's miss re-prefilled the whole batch, whose attention
# (rows x heads x length^2 floats) ended two evaluations in the out-of-memory killer
EVAL_BATCH = 32


def evaluate_checkpoint(checkpoint: str | Path, policy: str, tasks: Sequence[str], split: str, seeds: Sequence[int],
                        *, optima: Optima | None = None, keep_replays: bool = False, max_new_tokens: int = 64,
                        constrained: bool = False, progress: Callable[[int], None] | None = None,
                        prompt_mode: str = "tools") -> list[EpisodeResult]:
    """Every task x seed played greedily by the checkpoint in seat lab_0 against the world's
    archetypes, as :class:`~gpu_arena.evaluation.EpisodeResult` rows named ``policy`` (the name the
    same policy has in ``gpu-arena eval``). ``optima`` caches each world's exact welfare optimum,
    as in :func:`gpu_arena.evaluation.run_evaluation`. ``constrained``: replies decoded under the
    seat's action grammar, as ``llm:hf:DIR?constrained=1`` (name ``policy`` accordingly);
    ``prompt_mode``: tools or compact, as ``llm:hf:DIR?mode=...``."""
    from ..evaluation.runner import episode_result, world_optimum
    from .presets import load_pretrained
    from .rollouts import BatchedSampler, Rollout, World

    model, tokenizer = load_pretrained(checkpoint)
    sampler = BatchedSampler(model, tokenizer, temperature=0.0, max_new_tokens=max_new_tokens,
                             batch_size=max(1, min(len(seeds), EVAL_BATCH)), constrained=constrained,
                             prompt_mode=prompt_mode)
    optima = optima if optima is not None else {}
    results: list[EpisodeResult] = []

    def finish(rollout: Rollout, env: Any) -> None:
        w = rollout.world
        optima[(w.task, w.split, w.seed)] = cached = world_optimum(w.task, w.split, w.seed,
                                                                   optima.get((w.task, w.split, w.seed)))
        results.append(episode_result(env, policy, w.task, w.split, w.seed, episode_return=rollout.episode_return,
                                      columns=dict(rollout.columns), steps=rollout.turns, optimum=cached[1],
                                      keep_replay=keep_replays))

    for task in tasks:
        sampler.play([World(task, split, s) for s in seeds], finish=finish, progress=progress)
    return results


# what evaluate_checkpoint plays as the one-episode-at-a-time agent does (tested row for row): greedy,
# on the default device and dtype, in a mode with tool-call replies
_BATCHED_OPTIONS = frozenset({"mode", "max_new_tokens", "constrained", "seed", "temperature"})


def batched_spec(policy: str) -> tuple[str, str, int, bool] | None:
    """``(path, prompt mode, max new tokens, constrained)`` where :func:`evaluate_checkpoint` gives
    ``policy``'s own rows (an ``llm:hf:`` checkpoint decoded greedily in tools or compact mode, with
    no device, dtype or sampling option); None for any other policy."""
    from ..llm.agents import TransformersAgent, trained_prompt_mode
    from ..llm.registry import hf_options

    if not policy.startswith("llm:hf:"):
        return None
    path, opts = hf_options(policy.removeprefix("llm:"))
    if set(opts) - _BATCHED_OPTIONS or float(opts.get("temperature", 0.0)) != 0.0:
        return None
    mode = opts.get("mode") or trained_prompt_mode(path) or "json"
    if mode not in ("tools", "compact"):
        return None
    default = inspect.signature(TransformersAgent).parameters["max_new_tokens"].default
    return path, mode, int(opts.get("max_new_tokens", default)), bool(opts["constrained"])


def evaluate_batched(specs: Mapping[str, tuple[str, str, int, bool]], tasks: Sequence[str], split: str,
                     seeds: Sequence[int], *, optima: Optima | None = None, keep_replays: bool = False,
                     progress: Callable[[int], None] | None = None) -> list[EpisodeResult]:
    """The rows of every policy in ``specs`` (policy -> its :func:`batched_spec`), each checkpoint
    played batched: one ``generate`` a round for all its episodes, against the world's archetypes."""
    results: list[EpisodeResult] = []
    for policy, (path, mode, tokens, constrained) in specs.items():
        results += evaluate_checkpoint(path, policy, tasks, split, seeds, optima=optima, keep_replays=keep_replays,
                                       max_new_tokens=tokens, constrained=constrained, progress=progress,
                                       prompt_mode=mode)
    return results

__all__ = ["batched_spec", "evaluate_batched", "evaluate_checkpoint", "turn_stats"]
