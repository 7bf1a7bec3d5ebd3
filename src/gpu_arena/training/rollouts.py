"""Batched on-policy rollouts for training: a local checkpoint against the live environment, on the
rollout engine (:mod:`gpu_arena.rollouts`).

A :class:`BatchedSampler` is the engine with a transformers model as its backend and the
training's defaults: the seat, the opponents, the action grammar, a proposal policy for the
lookahead, and how many environment workers hold the episodes (``workers=0``: in this process;
``N``: N processes that step, render, tokenize and parse while the model generates; with
``worker_backend="ray"``, Ray actors). A rollout's return is the return the same model would get
as ``llm:hf:DIR?mode=tools`` in an evaluation with the same sampling; each :class:`Rollout` keeps
the chat as the model lived it, so it is also an SFT record in the teacher data's format.

Why not TRL's GRPO generation loop: it re-renders and re-generates every rollout per tool call
with the trainer's bookkeeping around it (15-19 episodes/min for the ``small`` model, decision
0020); here one ``generate`` serves every episode of a round, so the model's own work dominates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..llm.prompts import prompt_tools
from ..rollouts import (
    Answer,
    RolloutEngine,
    RolloutStats,
    SessionConfig,
    TransformersBackend,
    WorkerPool,
    World,
    incremental,
    probe_chat,
)
from ..rollouts import Rollout as Rollout


def chat_mode(tokenizer: Any, prompt_mode: str = "tools") -> str:
    """``incremental`` where prompts of ``prompt_mode`` may be built from pieces for ``tokenizer``
    (checked once on a probe chat in that mode, :func:`gpu_arena.rollouts.incremental`), else
    ``full``."""
    probe = probe_chat(mode=prompt_mode) if prompt_mode != "tools" else None
    return "incremental" if incremental(tokenizer, prompt_tools(prompt_mode), probe) else "full"


class BatchedSampler:
    """Plays worlds with ``model`` in the controlled seat, every round one batched ``generate``.

    ``temperature=0`` decodes greedily. ``max_new_tokens`` caps one answer (an action takes 5-35
    tokens). ``batch_size`` bounds how many episodes are played together; their prompts of a round
    are generated in length-sorted groups of ``group_size``. ``constrained`` decodes under the seat's
    action grammar as ``llm:hf:DIR?constrained=1`` does (:mod:`gpu_arena.llm.constrain`). ``workers``
    and ``worker_backend``: where the episodes live (see the module). The model is used in eval
    mode under ``torch.inference_mode`` and left as it was found. ``prompt_mode``: ``tools`` (the
    default) or ``compact`` (:mod:`gpu_arena.llm.compact`: the system prompt and the current turn
    alone, no tool schemas, for pretrained tokenizers). Close it (or use it as a context manager)
    to stop its workers.
    """

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 64, batch_size: int = 32, seat: str = "lab_0",
                 opponents: Any = None, proposal: str | None = None, group_size: int = 256,
                 constrained: bool = False, workers: int = 0, worker_backend: str = "process",
                 prompt_mode: str = "tools") -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.seat = seat
        self.opponents = opponents
        # explore turns marked for the proposal take that scripted policy's action instead of a sample
        # (e.g. random_valid: a valid move with no expertise in it, so the reward alone decides)
        self.proposal = proposal
        self.constrained = constrained
        self.prompt_mode = prompt_mode
        self.config = SessionConfig(tokenizer, seat=seat, opponents=opponents, constrained=constrained,
                                    chat_mode=chat_mode(tokenizer, prompt_mode), prompt_mode=prompt_mode)
        self.backend = TransformersBackend(model, tokenizer, group_size=group_size)
        self.pool = WorkerPool(self.config, workers, worker_backend)
        self.engine = RolloutEngine(self.backend, self.pool, temperature=temperature, top_p=top_p,
                                    max_new_tokens=max_new_tokens, batch_size=batch_size, proposal=proposal)

    def play(self, worlds: Sequence[World], *, seed: int = 0, explore_turns: Sequence[int | None] | None = None,
             propose: Sequence[bool] | None = None, progress: Callable[[int], None] | None = None,
             finish: Callable[[Rollout, Any], Any] | None = None) -> tuple[list[Rollout], RolloutStats]:
        """Play every world once; the rollouts in the order of ``worlds`` and the timing
        (:meth:`gpu_arena.rollouts.RolloutEngine.play`)."""
        return self.engine.play(worlds, seed=seed, explore_turns=explore_turns, propose=propose, progress=progress,
                                finish=finish)

    def close(self) -> None:
        self.pool.shutdown()

    def __enter__(self) -> BatchedSampler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["Answer", "BatchedSampler", "Rollout", "RolloutStats", "World", "chat_mode"]
