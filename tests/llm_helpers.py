"""Helpers for the prompt tests: rule_expert's turns with the chat each is prompted with."""

from __future__ import annotations

from typing import Any

from gpu_arena.core.policy import seat_view
from gpu_arena.env import GpuArenaEnv
from gpu_arena.llm import Conversation
from gpu_arena.llm.tools import render_reply
from gpu_arena.policies import make_policy


def teacher_turns(task: str, seed: int, mode: str = "compact", split: str = "train"
                  ) -> list[tuple[Any, Any, list[dict[str, Any]]]]:
    """(view, teacher action, the chat a model in ``mode`` is shown) for every turn of rule_expert in lab_0."""
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


def grammar_takes(tokenizer: Any, lltok: Any, grammar: str, mode: str, action: Any) -> tuple[bool, list[int]]:
    """Whether the compiled ``grammar`` accepts ``action`` as a reply in ``mode`` (a tools-mode
    reply as the chat template writes its tool call), and the reply's tokens."""
    import llguidance

    content, calls = render_reply(action, mode, "call_0")
    if mode == "tools":
        text = tokenizer.apply_chat_template([{"role": "assistant", "content": "", "tool_calls": calls}],
                                             tokenize=False)
        reply = text[text.index("<tool_call>"):text.index("</tool_call>") + len("</tool_call>")]
    else:
        reply = content
    ids = tokenizer.encode(reply, add_special_tokens=False)
    m = llguidance.LLMatcher(lltok, grammar, log_level=0)
    return m.try_consume_tokens(ids) == len(ids) and m.is_accepting(), ids
