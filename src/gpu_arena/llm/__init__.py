"""Language-model seats: prompts, the action space as tools, parsing, and model backends.

- :func:`system_prompt`, :func:`render_turn`, :class:`Conversation`: what a model reads.
- :func:`action_tools`, :func:`json_mode_instruction`: how it answers (tool calls or JSON).
- :func:`parse_action`: its answer as an ``ArenaAction``, or a :class:`FormatError` (never raises).
- :class:`OpenAICompatibleAgent`, :class:`TransformersAgent`: policies for any seat; also
  reachable by name, ``make_policy("llm:openai:<model>@<base_url>")`` / ``"llm:hf:<path>"``.

Backends are imported lazily (``openai``, ``torch``, ``transformers``), so the prompts and the
parser cost nothing extra to import.
"""

from __future__ import annotations

from .agents import ChatAgent, Ledger, LLMUnavailableError, OpenAICompatibleAgent, TransformersAgent
from .parsing import FORMAT_ERROR_CODES, FormatError, parse_action
from .prompts import Conversation, estimate_request_tokens, estimate_tokens, render_turn, system_prompt
from .registry import make_llm_policy
from .tools import action_schema, action_tools, json_mode_instruction

__all__ = [
    "FORMAT_ERROR_CODES",
    "ChatAgent",
    "Conversation",
    "FormatError",
    "LLMUnavailableError",
    "Ledger",
    "OpenAICompatibleAgent",
    "TransformersAgent",
    "action_schema",
    "action_tools",
    "estimate_request_tokens",
    "estimate_tokens",
    "json_mode_instruction",
    "make_llm_policy",
    "parse_action",
    "render_turn",
    "system_prompt",
]
