"""GRPO's rollouts on the rollout engine: TRL's ``GRPOTrainer`` fed through its ``rollout_func``.

TRL's own multi-turn loop (``environment_factory``) generates one tool call per ``generate`` for
each rollout, re-renders the chat after every call and decodes freely: 15-19 episodes/min for the
``small`` model on two cores and, for a tiny model, 0% valid actions (decision 0020, issue 31).
Here the trainer hands the step's prompts (each names a world; a group is ``num_generations`` rows
of one world) to :class:`EngineRollouts`, which plays all of their episodes at once on the engine (one ``generate`` per round
for every episode, under the seat's action grammar when constrained, environment workers off the
generation path) and gives back what TRL trains on:

- ``prompt_ids``: the first prompt (system turn with the tool schemas, first turn);
- ``completion_ids``: every id after it, the model's replies as it generated them and the
  environment's turns between them (verbatim prompts, :class:`~gpu_arena.rollouts.SessionConfig`);
- ``env_mask``: 1 on the model's ids, 0 on the environment's (the loss is on the model's alone);
- ``logprobs``: ``None`` (the trainer computes the old policy's log-probabilities itself);
- per rollout, the episode return, its reward columns and its valid-action rate, for the reward
  functions of :func:`reward_functions` (the return has weight 1, the rest are logged).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from ..core.types import REWARD_COLUMNS
from ..rollouts import RolloutEngine, SessionConfig, TransformersBackend, WorkerPool, World


def world_prompt(task: str, split: str, seed: int, opponents: str | None = None) -> list[dict[str, str]]:
    """A dataset row's prompt on the engine: the world it names (the engine renders the real one)."""
    return [{"role": "user", "content": json.dumps({"task": task, "split": split, "seed": seed,
                                                    "opponents": opponents})}]


def _world(prompt: list[dict[str, Any]]) -> World:
    spec = json.loads(prompt[-1]["content"])
    return World(spec["task"], spec["split"], int(spec["seed"]), spec.get("opponents"))


class EngineRollouts:
    """``rollout_func`` for ``GRPOTrainer`` (see the module). ``opponents``: who plays the other seats
    unless a row names its own; ``workers``/``backend``: the engine's environment workers.
    :attr:`last` holds the last step's :class:`~gpu_arena.rollouts.RolloutStats`. Close it to stop
    its workers."""

    def __init__(self, tokenizer: Any, *, constrained: bool, max_turn_tokens: int, opponents: str | None = None,
                 workers: int = 0, backend: str = "process") -> None:
        self.tokenizer = tokenizer
        self.max_turn_tokens = max_turn_tokens
        from .rollouts import chat_mode

        if chat_mode(tokenizer) != "incremental":  # verbatim trajectories append each turn to the last
            raise ValueError("GRPO on the engine needs a chat template that extends a chat by appending "
                             "(gpu_arena.rollouts.incremental); use rollouts='trl'")
        self.config = SessionConfig(tokenizer, opponents=opponents, constrained=constrained, verbatim=True)
        self.pool = WorkerPool(self.config, workers, backend)
        self.last: Any = None
        self.calls = 0

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        training = bool(trainer.model.training)
        # TRL 1.16 hands over the step's rows as its sampler repeated them (each world num_generations
        # times in a row) and scores one completion per row: one episode per prompt given
        worlds = [_world(p) for p in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model)
        engine = RolloutEngine(TransformersBackend(model, self.tokenizer), self.pool,
                               temperature=float(trainer.temperature), top_p=float(getattr(trainer, "top_p", 1.0)),
                               max_new_tokens=self.max_turn_tokens, batch_size=max(len(worlds), 1))
        rollouts, stats = engine.play(worlds, seed=int(trainer.state.global_step) * 7919 + self.calls)
        self.calls += 1
        self.last = stats
        if training:
            model.train()
        return {
            "prompt_ids": [r.prompt_ids for r in rollouts],
            "completion_ids": [r.completion_ids for r in rollouts],
            "env_mask": [r.completion_mask for r in rollouts],
            "logprobs": None,
            "episode_return": [r.episode_return for r in rollouts],
            "columns": [dict(r.columns) for r in rollouts],
            "turns": [r.turns for r in rollouts],
            "valid_turns": [r.valid_turns for r in rollouts],
            "format_errors": [r.format_errors for r in rollouts],
            "refusals": [dict(r.refusals) for r in rollouts],
            # each move as ArenaToolEnv records it: the action's fields, or the refusal of an unreadable reply
            "actions": [[a.model_dump(exclude_defaults=True) if hasattr(a, "model_dump") else
                         {"rejected": getattr(a, "code", ""), "message": getattr(a, "message", "")}
                         for a in r.actions] for r in rollouts],
            "turns_per_s": [stats.turns_per_s] * len(rollouts),
            "generate_share": [stats.generate_share] * len(rollouts),
        }

    def close(self) -> None:
        self.pool.shutdown()


def reward_functions() -> list[Callable[..., list[float]]]:
    """The reward functions of an engine-fed GRPO run, in order: the episode return (weight 1), then,
    to be given weight 0 so they are only logged, one per reward column and ``valid_action_rate``
    (which also logs ``arena/*`` metrics, the engine's turns/s and generate share, and per turn the
    share refused by each rule, ``arena/refused/<code>``)."""

    def episode_return(episode_return: list[float], **_: Any) -> list[float]:
        return [float(x) for x in episode_return]

    def column(name: str) -> Callable[..., list[float]]:
        def fn(columns: list[dict[str, float]], **_: Any) -> list[float]:
            return [float(c[name]) for c in columns]

        fn.__name__ = fn.__qualname__ = name
        return fn

    def valid_action_rate(turns: list[int], valid_turns: list[int], format_errors: list[int],
                          episode_return: list[float], turns_per_s: list[float], generate_share: list[float],
                          refusals: list[dict[str, int]] | None = None,
                          log_metric: Callable[[str, float], None] | None = None, **_: Any) -> list[float]:
        rates = [v / t if t else 0.0 for v, t in zip(valid_turns, turns, strict=True)]
        if log_metric is not None and turns:
            total = sum(turns) or 1
            log_metric("arena/valid_action_rate", sum(valid_turns) / total)
            log_metric("arena/format_error_rate", sum(format_errors) / total)
            log_metric("arena/episode_return", sum(episode_return) / len(episode_return))
            log_metric("arena/turns_per_s", turns_per_s[0])
            log_metric("arena/generate_share", generate_share[0])
            # which rules refused the turns that were not valid: what a grammar cannot see
            codes: Counter[str] = Counter()
            for r in refusals or ():
                codes.update(r)
            for code, n in sorted(codes.items()):
                log_metric(f"arena/refused/{code}", n / total)
        return rates

    return [episode_return, *(column(c) for c in REWARD_COLUMNS), valid_action_rate]


__all__ = ["EngineRollouts", "reward_functions", "world_prompt"]
