"""``llm:`` policy names for the registry (``make_policy``), the CLI and the evaluation harness.

Grammar (one name, no commas, so it fits in ``--policies a,b,c``)::

    llm:openai:<model>@<base_url>[?option=value&...]    an OpenAI-compatible endpoint
    llm:openai:<model>[?...]                            base URL from $OPENAI_BASE_URL (else the client's default)
    llm:hf:<path>[?option=value&...]                    a local transformers checkpoint

Options: ``mode`` (tools|json|compact), ``temperature``, ``max_tokens`` / ``max_new_tokens``, ``timeout``,
``max_retries``, ``seed``, ``max_turns``, ``tool_choice``, ``on_error`` (raise|reject),
``api_key_env`` (the variable holding the key; default ``OPENAI_API_KEY``: keys never go in
names, which end up in result files), and for ``hf``: ``device``, ``dtype``, ``top_p``.
Example: ``llm:openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1?mode=json&temperature=0.7``.

The seed the environment or the harness passes is used when the name fixes none, so sampled
episodes are reproducible where the backend honours seeds.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qsl

from .agents import ChatAgent, OpenAICompatibleAgent, TransformersAgent

_INT = ("max_tokens", "max_new_tokens", "max_retries", "seed", "max_turns", "constrained")
_FLOAT = ("temperature", "timeout", "top_p", "backoff_s")
_STR = ("mode", "tool_choice", "on_error", "api_key_env", "device", "dtype")
_OPENAI = {"mode", "temperature", "max_tokens", "timeout", "max_retries", "seed", "max_turns", "tool_choice",
           "on_error", "api_key_env", "backoff_s"}
_HF = {"mode", "temperature", "max_tokens", "max_new_tokens", "seed", "max_turns", "device", "dtype", "top_p",
       "constrained"}


def _options(query: str, allowed: set[str], spec: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key not in allowed:
            raise ValueError(f"unknown option {key!r} in policy {spec!r}; known: {', '.join(sorted(allowed))}")
        try:
            out[key] = int(value) if key in _INT else float(value) if key in _FLOAT else value
        except ValueError:
            raise ValueError(f"option {key}={value!r} in policy {spec!r} is not a number") from None
    return out


def make_llm_policy(spec: str, seed: int | None = None, **_world_params: Any) -> ChatAgent:
    """Build the agent for ``spec`` (the name after ``llm:``). World parameters of opponent seats
    (acceptance margins and the like) are for scripted policies and are ignored here."""
    backend, _, rest = spec.partition(":")
    rest, _, query = rest.partition("?")
    if backend == "openai":
        model, _, base_url = rest.partition("@")
        if not model:
            raise ValueError(f"policy 'llm:{spec}' names no model; expected llm:openai:<model>@<base_url>")
        opts = _options(query, _OPENAI, f"llm:{spec}")
        key_env = opts.pop("api_key_env", "OPENAI_API_KEY")
        opts.setdefault("seed", seed)
        return OpenAICompatibleAgent(base_url or os.environ.get("OPENAI_BASE_URL") or None, model,
                                     api_key=os.environ.get(key_env), **opts)
    if backend == "hf":
        path, opts = hf_options(spec)
        opts.setdefault("seed", seed)
        return TransformersAgent(path, **opts)
    raise ValueError(f"unknown LLM backend {backend!r} in 'llm:{spec}'; expected openai or hf")


def hf_options(spec: str) -> tuple[str, dict[str, Any]]:
    """A local checkpoint's name after ``llm:`` (``hf:<path>[?...]``) read as its path and the
    :class:`TransformersAgent` options it sets (``max_tokens`` as ``max_new_tokens``,
    ``constrained`` as a bool); ``ValueError`` for another backend or a bad option."""
    backend, _, rest = spec.partition(":")
    rest, _, query = rest.partition("?")
    if backend != "hf":
        raise ValueError(f"policy 'llm:{spec}' is not a local checkpoint (llm:hf:<path>)")
    if not rest:
        raise ValueError(f"policy 'llm:{spec}' names no checkpoint; expected llm:hf:<path>")
    opts = _options(query, _HF, f"llm:{spec}")
    if "max_tokens" in opts:
        opts["max_new_tokens"] = opts.pop("max_tokens")
    if opts.get("constrained", 0) not in (0, 1):
        raise ValueError(f"option constrained in policy 'llm:{spec}' is 0 or 1")
    opts["constrained"] = bool(opts.get("constrained", 0))
    return rest, opts


__all__ = ["hf_options", "make_llm_policy"]
