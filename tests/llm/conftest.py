"""Fixtures shared by the prompt tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpu_arena.core.policy import seat_view
from gpu_arena.env import GpuArenaEnv
from gpu_arena.llm import Conversation
from gpu_arena.llm.tools import render_reply
from gpu_arena.policies import make_policy


def _teacher_turns(task: str, seed: int, mode: str = "compact", split: str = "train") -> list[tuple[Any, Any, list[dict[str, Any]]]]:
    """(view, teacher action, the chat the turn is prompted with) for every turn of rule_expert in lab_0."""
    env = GpuArenaEnv(task=task, split=split)
    obs = env.reset(seed=seed)
    assert env.episode is not None
    teacher = make_policy("rule_expert", seed=seed)
    conv = Conversation(mode)
    out = []
    while not obs.done:
        conv.observe(obs)
        action = teacher.act(seat_view(teacher, env.episode, "lab_0"))
        out.append((env.episode.observe("lab_0"), action, conv.messages()))
        conv.reply(*render_reply(action, mode, f"call_{conv.turns}"))
        obs = env.step(action)
    return out


@pytest.fixture
def teacher_turns() -> Callable[..., list[tuple[Any, Any, list[dict[str, Any]]]]]:
    """``teacher_turns(task, seed, mode="compact", split="train")``: rule_expert's turns in lab_0, each
    with the chat a model in that prompt mode is shown."""
    return _teacher_turns
