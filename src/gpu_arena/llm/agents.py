"""Language-model policies: an OpenAI-compatible endpoint or a local transformers checkpoint in any seat.

Both implement the ``Policy`` protocol (``act(observation) -> action``) and share one loop
(:class:`ChatAgent`): render the seat's observation into its :class:`Conversation`, ask the model,
parse the answer with :func:`parse_action`, record tokens and latency in the seat's
:class:`Ledger`. A reply that is not an action comes back as a :class:`FormatError`, which the
environment steps as an invalid action with its own code and the bounded penalty.

Concurrency: an agent is thread-safe (one lock per instance serialises its calls) and keeps one
conversation and one ledger per seat, so one instance may drive several seats of one episode.
For many episodes at once use one instance per seat per episode — what ``make_policy("llm:...")``
and the environment do — from threads or processes: instances of ``OpenAICompatibleAgent`` with
the same endpoint share one HTTP connection pool, and ``TransformersAgent`` instances share the
loaded model.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.policy import PolicyBase
from ..core.types import RejectedAction
from ..models import ArenaAction
from .parsing import FormatError, parse_action
from .prompts import (
    MODES,
    Conversation,
    Mode,
    estimate_request_tokens,
    estimate_tokens,
    prompt_tools,
    reply_format,
)
from .shortform import expand
from .tools import action_tools

OnError = Literal["raise", "reject"]


class LLMUnavailableError(RuntimeError):
    """The model could not be reached or refused the request (after the retries, for transient errors)."""


class _TransientError(Exception):
    """A failure worth retrying (connection, timeout, 408/409/429, 5xx)."""


@dataclass
class Completion:
    """What a backend returned for one request."""

    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    prompt_tokens: int | None = None  # None: the backend did not say
    completion_tokens: int | None = None


@dataclass
class Ledger:
    """Token and latency accounting for one seat (across its episodes).

    ``model_s`` is time spent waiting for the model (every attempt and backoff included);
    ``overhead_s`` is the agent's own time per call (rendering, parsing, bookkeeping).
    ``estimated_calls`` counts calls whose token numbers were estimated because the backend
    reported no usage.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_calls: int = 0
    model_s: float = 0.0
    overhead_s: float = 0.0
    max_call_s: float = 0.0
    retries: int = 0
    failures: int = 0
    format_errors: int = 0
    error_codes: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)

    def merge(self, other: Ledger) -> None:
        for name in ("calls", "prompt_tokens", "completion_tokens", "estimated_calls", "model_s", "overhead_s",
                     "retries", "failures", "format_errors"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_call_s = max(self.max_call_s, other.max_call_s)
        self.error_codes.update(other.error_codes)
        self.actions.update(other.actions)

    def to_dict(self) -> dict[str, Any]:
        n = max(self.calls, 1)
        return {
            "calls": self.calls, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "prompt_tokens_per_call": self.prompt_tokens / n, "completion_tokens_per_call": self.completion_tokens / n,
            "estimated_calls": self.estimated_calls, "model_s": self.model_s, "overhead_s": self.overhead_s,
            "model_s_per_call": self.model_s / n, "overhead_ms_per_call": 1000 * self.overhead_s / n,
            "max_call_s": self.max_call_s, "retries": self.retries, "failures": self.failures,
            "format_errors": self.format_errors, "format_error_rate": self.format_errors / n,
            "error_codes": dict(self.error_codes), "actions": dict(self.actions),
        }


@dataclass
class _Seat:
    conversation: Conversation
    episode: Any = None


class ChatAgent(PolicyBase):
    """The shared loop of language-model policies; subclasses implement :meth:`_complete`.

    Contract: ``act(observation)`` takes one seat's view (a core ``SeatView`` or an
    ``ArenaObservation``) for successive rounds of an episode and returns an ``ArenaAction`` or a
    :class:`FormatError`; it never raises on what the model says. A new episode for a seat is
    recognised when its round does not advance (or its ``episode_id`` metadata changes); call
    :meth:`reset` to start over explicitly. If the model cannot be reached after the retries it
    raises :class:`LLMUnavailableError` (``on_error="raise"``, the default: an evaluation should
    not silently count outages as moves) or returns ``RejectedAction("llm_unavailable", ...)``
    (``on_error="reject"``: the turn is lost with the invalid-action penalty).
    """

    uses_aids = True  # the prompt shows the seat's decision aids

    def __init__(self, *, mode: Mode = "tools", max_turns: int | None = None, system_prompt: str | None = None,
                 max_retries: int = 3, backoff_s: float = 0.5, max_backoff_s: float = 8.0,
                 on_error: OnError = "raise", seed: int | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if on_error not in ("raise", "reject"):
            raise ValueError(f"on_error must be 'raise' or 'reject', got {on_error!r}")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.mode: Mode = mode
        self.max_turns = max_turns
        self.system_prompt = system_prompt
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.on_error: OnError = on_error
        self.seed = seed
        self.ledgers: dict[str, Ledger] = {}
        self._seats: dict[str, _Seat] = {}
        self._lock = threading.RLock()
        self._jitter = random.Random(seed)  # backoff jitter only; never touches the episode
        self._sleep = time.sleep  # tests replace it
        self._tools = prompt_tools(mode)  # the schemas the prompt carries, built once: backends only read them
        # the tools a reply is read against (compact mode answers with tool calls it was shown no schema of)
        self._reply_tools = action_tools() if reply_format(mode) == "tools" else None
        self._tools_tokens = estimate_request_tokens([], self._tools) if self._tools else 0

    # ------------------------------------------------------------------ public

    @property
    def ledger(self) -> Ledger:
        """All seats' ledgers summed."""
        total = Ledger()
        with self._lock:
            for led in self.ledgers.values():
                total.merge(led)
        return total

    def usage(self) -> dict[str, Any] | None:
        return self.ledger.to_dict()

    def conversation(self, seat: str) -> Conversation | None:
        """The current conversation of ``seat`` (its transcript is an SFT-ready chat)."""
        with self._lock:
            state = self._seats.get(seat)
            return state.conversation if state else None

    def reset(self, seat: str | None = None) -> None:
        """Forget the conversation of ``seat`` (or of every seat); ledgers are kept."""
        with self._lock:
            if seat is None:
                self._seats.clear()
            else:
                self._seats.pop(seat, None)

    def act(self, observation: Any) -> ArenaAction | RejectedAction:
        started = time.perf_counter()
        with self._lock:
            seat = str(observation.controlled_lab_id)
            led = self.ledgers.setdefault(seat, Ledger())
            conv = self._conversation_for(seat, observation)
            conv.observe(observation)
            messages = conv.messages()
            tools = self._tools
            model_started = time.perf_counter()
            try:
                completion = self._complete_with_retries(messages, tools, led)
            except LLMUnavailableError as e:
                model_s = time.perf_counter() - model_started
                led.calls += 1
                led.failures += 1
                led.model_s += model_s
                led.error_codes["llm_unavailable"] += 1
                conv.reply("")  # keeps user/assistant alternation for the next turn
                if self.on_error == "raise":
                    raise
                return RejectedAction("llm_unavailable", str(e)[:300])
            model_s = time.perf_counter() - model_started
            action = expand(parse_action(completion.tool_calls if completion.tool_calls else completion.content),
                            observation)
            conv.reply(completion.content, completion.tool_calls)
            estimated = completion.prompt_tokens is None or completion.completion_tokens is None
            led.calls += 1
            led.estimated_calls += estimated
            led.prompt_tokens += completion.prompt_tokens if completion.prompt_tokens is not None \
                else estimate_request_tokens(messages) + self._tools_tokens
            led.completion_tokens += completion.completion_tokens if completion.completion_tokens is not None \
                else estimate_tokens(completion.content or "") + sum(
                    estimate_tokens(str(c.get("function", {}))) for c in completion.tool_calls or [])
            led.model_s += model_s
            if isinstance(action, FormatError):
                led.format_errors += 1
                led.error_codes[action.code] += 1
            else:
                led.actions[action.action_type] += 1
            total = time.perf_counter() - started
            led.overhead_s += total - model_s
            led.max_call_s = max(led.max_call_s, total)
            return action

    # ------------------------------------------------------------------ backend

    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Completion:
        """One request to the model. Raise ``_TransientError`` for what is worth retrying and
        ``LLMUnavailableError`` for what is not."""
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers

    def _conversation_for(self, seat: str, observation: Any) -> Conversation:
        metadata = getattr(observation, "metadata", None) or {}
        episode = metadata.get("episode_id") if isinstance(metadata, dict) else None
        state = self._seats.get(seat)
        conv = state.conversation if state else None
        if state is None or conv is None or (episode is not None and episode != state.episode) or (
                conv.last_round is not None and observation.round_index <= conv.last_round):
            conv = Conversation(self.mode, system=self.system_prompt, max_turns=self.max_turns)
            self._seats[seat] = _Seat(conv, episode)
        return conv

    def _complete_with_retries(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                               led: Ledger) -> Completion:
        attempt = 0
        while True:
            try:
                return self._complete(messages, tools)
            except _TransientError as e:
                if attempt >= self.max_retries:
                    raise LLMUnavailableError(f"gave up after {attempt + 1} attempts: {e}") from e
                # exponential backoff with jitter, so concurrent episodes do not retry in lockstep
                delay = min(self.max_backoff_s, self.backoff_s * 2 ** attempt) * (0.5 + 0.5 * self._jitter.random())
                attempt += 1
                led.retries += 1
                self._sleep(delay)


# ---------------------------------------------------------------------- OpenAI-compatible endpoints

_CLIENTS: dict[tuple[str | None, str, float], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(base_url: str | None, api_key: str, timeout: float) -> Any:
    """One ``openai.OpenAI`` per (endpoint, key, timeout) per process: instances share its pool.
    Its own retries are off: ours count them in the ledger."""
    import openai

    key = (base_url, api_key, timeout)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)
            _CLIENTS[key] = client
        return client


def _tool_call_dict(call: Any) -> dict[str, Any]:
    fn = call.function
    return {"id": call.id, "type": "function", "function": {"name": fn.name, "arguments": fn.arguments or ""}}


class OpenAICompatibleAgent(ChatAgent):
    """A seat played by a chat model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint
    (vLLM, SGLang, Ollama, ``transformers serve``, hosted APIs).

    ``mode="tools"`` sends the 14 actions as function tools and reads the first tool call (or, if
    the model answered in text, the JSON in it); ``mode="json"`` asks for one JSON object in the
    text; ``mode="compact"`` sends the compact prompt (:mod:`gpu_arena.llm.compact`: no tool
    schemas, the current turn alone) and reads the ``<tool_call>`` block of the text. ``timeout`` is per request; transient failures (connection, timeout, 408/409/429, 5xx)
    are retried ``max_retries`` times with exponential backoff and jitter; other HTTP errors are not
    retried. ``temperature``, ``max_tokens`` and ``seed`` go into every request (``seed`` only where
    the endpoint honours it); ``tool_choice`` is sent only if given (some servers refuse it);
    ``extra_body`` adds endpoint-specific fields. ``api_key`` defaults to ``$OPENAI_API_KEY``
    (local servers accept any key). See :class:`ChatAgent` for the act contract and concurrency.
    """

    def __init__(self, base_url: str | None, model: str, api_key: str | None = None, *, mode: Mode = "tools",
                 timeout: float = 60.0, max_retries: int = 3, backoff_s: float = 0.5, max_backoff_s: float = 8.0,
                 temperature: float = 0.0, max_tokens: int = 512, seed: int | None = None,
                 tool_choice: str | None = None, max_turns: int | None = None, system_prompt: str | None = None,
                 extra_body: dict[str, Any] | None = None, on_error: OnError = "raise") -> None:
        super().__init__(mode=mode, max_turns=max_turns, system_prompt=system_prompt, max_retries=max_retries,
                         backoff_s=backoff_s, max_backoff_s=max_backoff_s, on_error=on_error, seed=seed)
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.base_url = base_url
        self.model = str(model)  # a local checkpoint path may come as a Path
        self.timeout = timeout
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.tool_choice = tool_choice
        self.extra_body = dict(extra_body or {})
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.name = f"llm:openai:{model}" + (f"@{base_url}" if base_url else "")

    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Completion:
        import openai

        request: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                   "max_tokens": self.max_tokens}
        if self.seed is not None:
            request["seed"] = self.seed
        if tools:
            request["tools"] = tools
            if self.tool_choice is not None:
                request["tool_choice"] = self.tool_choice
        if self.extra_body:
            request["extra_body"] = self.extra_body
        try:
            resp = _client(self.base_url, self._api_key, self.timeout).chat.completions.create(**request)
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as e:
            raise _TransientError(f"{type(e).__name__}: {e}") from e
        except openai.APIStatusError as e:
            if e.status_code in (408, 409, 429) or e.status_code >= 500:
                raise _TransientError(f"HTTP {e.status_code}: {e}") from e
            raise LLMUnavailableError(f"HTTP {e.status_code} from {self.base_url}: {e}") from e
        except openai.OpenAIError as e:  # malformed responses and the like: not worth a retry
            raise LLMUnavailableError(f"{type(e).__name__}: {e}") from e
        if not resp.choices:
            return Completion(content=None)
        msg = resp.choices[0].message
        usage = resp.usage
        return Completion(
            content=msg.content,
            tool_calls=[_tool_call_dict(c) for c in msg.tool_calls or [] if getattr(c, "function", None)] or None,
            prompt_tokens=getattr(usage, "prompt_tokens", None), completion_tokens=getattr(usage, "completion_tokens", None))


# ---------------------------------------------------------------------- local transformers checkpoints

_MODELS: dict[tuple[str, str, str], tuple[Any, Any, threading.Lock]] = {}
_MODELS_LOCK = threading.Lock()


def trained_prompt_mode(model_path: str | os.PathLike[str]) -> Mode | None:
    """The prompt mode a checkpoint was trained in, as its ``arena_training.json`` records it
    (written beside every checkpoint ``gpu_arena.training`` saves); ``None`` for any other
    checkpoint, or a record that names no known mode."""
    import json
    from pathlib import Path

    from .prompts import MODES

    try:
        mode = json.loads((Path(model_path) / "arena_training.json").read_text())["preset"]["prompt_mode"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return mode if mode in MODES else None


def _load_local(path: str, device: str, dtype: str, trust_remote_code: bool) -> tuple[Any, Any, threading.Lock]:
    """Load (once per process) a causal LM and its tokenizer; a lock serialises generation on it."""
    key = (path, device, dtype)
    with _MODELS_LOCK:
        if key not in _MODELS:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
            if tokenizer.chat_template is None:
                raise ValueError(f"{path}: the tokenizer has no chat template; TransformersAgent needs a chat model")
            torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype, trust_remote_code=trust_remote_code)
            model.to(device)  # type: ignore[arg-type]  # transformers' stubs want a torch.device; a str works
            model.eval()
            _MODELS[key] = (model, tokenizer, threading.Lock())
        return _MODELS[key]


class TransformersAgent(ChatAgent):
    """A seat played by a local causal LM checkpoint (a directory or a hub id already in the cache),
    loaded with ``AutoModelForCausalLM`` / ``AutoTokenizer`` and prompted through its chat template.

    ``temperature=0`` decodes greedily; above it samples (``top_p``), seeded per call from ``seed``
    for reproducible episodes. ``mode``: ``"json"``, ``"tools"`` (the tools go to
    ``apply_chat_template(tools=...)``; the reply is read as text, so ``<tool_call>`` blocks and
    JSON both parse) or ``"compact"`` (the compact prompt for pretrained tokenizers,
    :mod:`gpu_arena.llm.compact`; tool-call replies). Left out, it is the mode the checkpoint was
    trained in when ``gpu_arena.training`` made it (:func:`trained_prompt_mode`), else ``"json"``
    (small checkpoints rarely have a tool-calling template). The model is loaded once per process
    and shared by every instance with the same path, device and dtype.
    ``constrained=True`` decodes under the seat's action grammar
    (:class:`gpu_arena.llm.matching.GrammarConstraint`): the model writes only actions its
    observation allows, each one complete (``llm:hf:DIR?constrained=1``; the token cap then rises
    to the grammar's longest reply).
    """

    def __init__(self, model_path: str, *, mode: Mode | None = None, device: str = "cpu", dtype: str = "auto",
                 max_new_tokens: int = 256, temperature: float = 0.0, top_p: float = 1.0, seed: int | None = None,
                 max_turns: int | None = None, system_prompt: str | None = None,
                 trust_remote_code: bool = False, constrained: bool = False) -> None:
        # a checkpoint prompted in another mode than it learned reads a prompt it never saw: a model
        # trained on tool calls, asked in json mode, wrote messages where it would have allocated
        mode = mode or trained_prompt_mode(model_path) or "json"
        super().__init__(mode=mode, max_turns=max_turns, system_prompt=system_prompt, max_retries=0, seed=seed)
        self.constrained = constrained
        self._grammar: Any = None
        self.model_path = str(model_path)
        self.device = device
        self.dtype = dtype
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.trust_remote_code = trust_remote_code
        self.name = f"llm:hf:{self.model_path}"
        self._calls = 0
        self._model, self._tokenizer, self._gen_lock = _load_local(self.model_path, device, dtype, trust_remote_code)

    def act(self, observation: Any) -> ArenaAction | RejectedAction:
        if self.constrained:
            from .constrain import seat_grammar

            self._grammar = seat_grammar(observation, self.mode)
        return super().act(observation)

    def _complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Completion:
        import torch

        tok, model = self._tokenizer, self._model
        inputs = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, return_dict=True,
                                         return_tensors="pt").to(model.device)
        prompt_len = int(inputs["input_ids"].shape[-1])
        sample = self.temperature > 0
        kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": sample,
                                  "pad_token_id": tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id}
        if sample:
            kwargs.update(temperature=self.temperature, top_p=self.top_p)
        if self.constrained and self._grammar is not None:
            from transformers import LogitsProcessorList

            from .matching import GrammarConstraint

            grammar = GrammarConstraint(tok, [self._grammar], prompt_len)
            kwargs["max_new_tokens"] = grammar.max_new_tokens(self.max_new_tokens)
            kwargs["logits_processor"] = LogitsProcessorList([grammar])
        with self._gen_lock, torch.no_grad():
            if sample and self.seed is not None:
                torch.manual_seed(self.seed * 1_000_003 + self._calls)  # the global RNG: hence under the lock
            out = model.generate(**inputs, **kwargs)
        self._calls += 1
        new = out[0, prompt_len:]
        text = tok.decode(new, skip_special_tokens=True)
        reading = self._reply_tools
        calls = _parsed_tool_calls(tok, new, inputs["input_ids"][0], reading) if reading else None
        if calls is not None:
            content, tool_calls = calls
            return Completion(content=content, tool_calls=tool_calls, prompt_tokens=prompt_len,
                              completion_tokens=int(new.shape[-1]))
        return Completion(content=text, prompt_tokens=prompt_len, completion_tokens=int(new.shape[-1]))


def _parsed_tool_calls(tok: Any, new: Any, prompt: Any, tools: list[dict[str, Any]]
                       ) -> tuple[str, list[dict[str, Any]]] | None:
    """Tool calls read with the tokenizer's own response parser, when it declares one (checkpoints
    trained by ``gpu_arena.training`` do; it is how TRL reads calls during GRPO). The conversation
    then records a call, and the next turn is its ``tool`` message, as in training. ``None``: no
    parser, no call, or a reply the parser cannot read (the text then goes to ``parse_action``)."""
    if getattr(tok, "response_template", None) is None:
        return None
    try:
        parsed = tok.parse_response(new.tolist(), prefix=prompt.tolist(), tools=tools)
    except Exception:  # a malformed call: parse_action reports it from the text as a format error
        return None
    calls = parsed.get("tool_calls") if isinstance(parsed, dict) else None
    if not calls or not all(isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls):
        return None
    content = parsed.get("content") or ""
    if tok.eos_token and isinstance(content, str):
        content = content.removesuffix(tok.eos_token)
    return content, [{"type": "function", "function": {"name": c["function"].get("name"),
                                                       "arguments": c["function"].get("arguments") or {}}}
                     for c in calls]


__all__ = ["ChatAgent", "Completion", "LLMUnavailableError", "Ledger", "OpenAICompatibleAgent", "TransformersAgent",
           "trained_prompt_mode"]
