"""Turn what a language model produced into an ``ArenaAction``, or a structured format error.

``parse_action`` accepts, in order of preference: OpenAI-style tool calls (objects from the
``openai`` client or plain dicts, alone or in a list; the first one is used), an already parsed
action dict, or completion text holding strict JSON, JSON in a Markdown code fence, a
``<tool_call>...</tool_call>`` block (Hermes/Qwen style, for servers that do not parse tool calls),
or a JSON object surrounded by prose. It never raises: anything it cannot read comes back as a
:class:`FormatError`, which *is* a core ``RejectedAction``, so the environment steps it as an
invalid action with its own code and the bounded ``invalid_action_penalty``.

Meaning is not judged here: ids, payments and budgets are the rules' business, so a well-formed
but illegal action parses and is refused by the rules with their own code. Parsing only checks the
shape (one action type of the 14, fields of ``ArenaAction`` with the right types).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..core.serialize import json_standard
from ..core.types import ACTION_TYPES, RejectedAction
from ..models import ArenaAction

# Codes of format errors; every one starts with ``format_`` so they are easy to tell from the
# rules' codes in rewards tables and transcripts.
FORMAT_EMPTY = "format_empty"  # nothing (or only whitespace) came back
FORMAT_NO_ACTION = "format_no_action"  # text without any JSON object or tool call
FORMAT_INVALID_JSON = "format_invalid_json"  # something JSON-like that does not parse
FORMAT_UNKNOWN_ACTION = "format_unknown_action"  # action_type / tool name not one of the 14
FORMAT_INVALID_ARGUMENTS = "format_invalid_arguments"  # wrong types, unknown fields, arguments not an object
FORMAT_ERROR_CODES = (FORMAT_EMPTY, FORMAT_NO_ACTION, FORMAT_INVALID_JSON, FORMAT_UNKNOWN_ACTION,
                      FORMAT_INVALID_ARGUMENTS)

MAX_INPUT_CHARS = 32_000  # longer completions are cut: an action never needs more
MAX_OBJECT_STARTS = 64  # '{' positions tried when scanning prose (bounds the work on garbage)
_RAW_KEPT = 300  # characters of the raw output kept on the error, for logs and the conversation

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n?(.*?)```", re.DOTALL)
# no \s* around the lazy group: with both, a long run of spaces is tried at every split (quadratic);
# the candidates are stripped anyway
_TOOL_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
# exactly one call in the frame the chat templates and the action grammar write
_ONE_CALL = re.compile(r"<tool_call>\n(\{.*\})\n</tool_call>", re.DOTALL)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class FormatError(RejectedAction):
    """A model output that is not an action. A ``RejectedAction``: stepping it spends the seat's
    turn as a wait with the ``invalid_action_penalty`` and ``code`` in ``last_action_result``.

    ``raw`` keeps the start of the offending output (for logs and for telling the model what went
    wrong); it never reaches the environment.
    """

    raw: str = ""


def one_tool_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` for a text that is exactly one ``<tool_call>`` block in the frame the
    action grammar writes, holding a JSON object with a string ``name`` and an object
    ``arguments`` and nothing else; ``None`` for anything else (:func:`parse_action` reads those)."""
    m = _ONE_CALL.fullmatch(text)
    if m is None:
        return None
    try:
        obj = json.loads(m.group(1))
    except ValueError:
        return None
    if not isinstance(obj, dict) or set(obj) != {"name", "arguments"} or not isinstance(obj["name"], str) \
            or not isinstance(obj["arguments"], dict):
        return None
    return obj["name"], obj["arguments"]


def _error(code: str, message: str, raw: Any) -> FormatError:
    text = raw if isinstance(raw, str) else repr(raw)
    return FormatError(code, message, text[:_RAW_KEPT])


def _validation_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:3]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "action"
        msg = "unknown field" if err.get("type") == "extra_forbidden" else err.get("msg", "invalid")
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


def _from_fields(action_type: Any, fields: Mapping[str, Any], raw: Any) -> ArenaAction | FormatError:
    if not isinstance(action_type, str) or action_type not in ACTION_TYPES:
        return _error(FORMAT_UNKNOWN_ACTION,
                      f"unknown action {str(action_type)[:40]!r}; expected one of {', '.join(ACTION_TYPES)}", raw)
    data = {str(k): v for k, v in fields.items() if k != "action_type"}
    data.pop("metadata", None)  # the wire model's bookkeeping field is not the model's to set
    odd = sorted(k for k, v in data.items() if not json_standard(v))
    if odd:  # NaN, Infinity, 1e400 or a lone surrogate: nothing the arena can record or show
        return _error(FORMAT_INVALID_ARGUMENTS, f"{action_type}: {', '.join(odd)[:80]}: not a finite number or not "
                                                "Unicode text (NaN, Infinity, a lone surrogate)", raw)
    try:
        return ArenaAction.model_validate({"action_type": action_type, **data})
    except ValidationError as e:
        return _error(FORMAT_INVALID_ARGUMENTS, f"{action_type}: {_validation_message(e)}", raw)
    except (TypeError, ValueError, RecursionError) as e:  # pragma: no cover - pydantic reports these as above
        return _error(FORMAT_INVALID_ARGUMENTS, f"{action_type}: {e}", raw)


def _arguments(value: Any, raw: Any) -> Mapping[str, Any] | FormatError:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as e:
            return _error(FORMAT_INVALID_JSON, f"tool arguments are not valid JSON: {e}", raw)
    if not isinstance(value, Mapping):
        return _error(FORMAT_INVALID_ARGUMENTS, f"tool arguments must be a JSON object, got {type(value).__name__}",
                      raw)
    return value


def _tool_parts(call: Any) -> tuple[Any, Any] | None:
    """(name, arguments) of an OpenAI tool call given as an object or a dict, or None."""
    if isinstance(call, Mapping):
        fn = call.get("function", call)
        if isinstance(fn, Mapping) and "name" in fn:
            return fn.get("name"), fn.get("arguments", fn.get("parameters"))
        return None
    fn = getattr(call, "function", None)
    if fn is not None and hasattr(fn, "name"):
        return fn.name, getattr(fn, "arguments", None)
    return None


def _from_object(obj: Any, raw: Any) -> ArenaAction | FormatError:
    """A decoded JSON value (or a tool call object) -> action or error."""
    if isinstance(obj, Mapping) and "action_type" in obj:
        return _from_fields(obj["action_type"], obj, raw)
    parts = _tool_parts(obj)
    if parts is not None:
        name, args = parts
        fields = _arguments(args, raw)
        if isinstance(fields, FormatError):
            return fields
        if "action_type" in fields and fields["action_type"] != name:
            return _error(FORMAT_INVALID_ARGUMENTS,
                          f"tool {str(name)[:40]!r} called with action_type {str(fields['action_type'])[:40]!r}", raw)
        return _from_fields(name, fields, raw)
    if isinstance(obj, Mapping):
        return _error(FORMAT_NO_ACTION, "the JSON object has no action_type", raw)
    return _error(FORMAT_NO_ACTION, f"expected a JSON object, got {type(obj).__name__}", raw)


def _candidates(text: str) -> list[str]:
    """Substrings worth decoding, best first: the whole text, fenced blocks, tool-call tags."""
    out = [text]
    out += [m.group(2).strip() for m in _FENCE.finditer(text)]
    out += [m.group(1).strip() for m in _TOOL_TAG.finditer(text)]
    return out


def _scan_objects(text: str) -> tuple[list[Any], bool]:
    """JSON objects embedded in prose (decoded from '{' positions), and whether any '{' failed."""
    found: list[Any] = []
    failed = False
    pos, tries = text.find("{"), 0
    while pos != -1 and tries < MAX_OBJECT_STARTS:
        tries += 1
        try:
            obj, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            failed = True
            pos = text.find("{", pos + 1)
            continue
        found.append(obj)
        pos = text.find("{", end)
    return found, failed


def _looks_like_action(obj: Any) -> bool:
    return isinstance(obj, Mapping) and ("action_type" in obj or _tool_parts(obj) is not None)


def _from_text(text: str) -> ArenaAction | FormatError:
    raw = text
    text = text[:MAX_INPUT_CHARS].strip()
    if not text:
        return _error(FORMAT_EMPTY, "the reply was empty; answer with one action", raw)
    decoded: list[Any] = []
    bad_json = False
    for chunk in _candidates(text):
        try:
            decoded.append(json.loads(chunk))
        except (ValueError, RecursionError):
            bad_json = bad_json or chunk.lstrip().startswith(("{", "["))
    if not any(_looks_like_action(o) for o in decoded):
        found, failed = _scan_objects(text)
        decoded += found
        bad_json = bad_json or failed
    for obj in decoded:
        if isinstance(obj, list) and obj and _looks_like_action(obj[0]):
            obj = obj[0]  # a list of tool calls or actions: the first one acts
        if _looks_like_action(obj):
            return _from_object(obj, raw)
    if decoded and isinstance(decoded[0], Mapping):
        return _from_object(decoded[0], raw)
    if bad_json:
        return _error(FORMAT_INVALID_JSON, "found JSON-like text that does not parse; answer with one JSON object", raw)
    return _error(FORMAT_NO_ACTION, "no action found; answer with one JSON object with an action_type", raw)


def _parse(output: Any) -> ArenaAction | FormatError:
    if output is None:
        return _error(FORMAT_EMPTY, "no output", "")
    if isinstance(output, ArenaAction):
        return output
    if isinstance(output, bytes | bytearray):
        output = bytes(output[:MAX_INPUT_CHARS * 4]).decode("utf-8", errors="replace")
    if isinstance(output, str):
        return _from_text(output)
    if isinstance(output, Mapping) or _tool_parts(output) is not None:
        return _from_object(output, output)
    if isinstance(output, Sequence):
        if not output:
            return _error(FORMAT_EMPTY, "no tool call", output)
        return _parse(output[0])  # parallel tool calls: one action per round, the first one acts
    return _error(FORMAT_NO_ACTION, f"cannot read an action from {type(output).__name__}", output)


def parse_action(output: Any) -> ArenaAction | FormatError:
    """Read one action from a model's output; never raises.

    ``output`` may be completion text, a tool call (an ``openai`` ``ChatCompletionMessageToolCall``
    or a dict ``{"function": {"name", "arguments"}}`` / ``{"name", "arguments"}``), a list of tool
    calls (the first acts), or an action dict. Returns an ``ArenaAction`` or a :class:`FormatError`
    with one of :data:`FORMAT_ERROR_CODES`.
    """
    try:
        return _parse(output)
    except Exception as e:  # a parser bug must cost the seat a turn, not crash an episode; fuzzed to stay rare
        return _error(FORMAT_NO_ACTION, f"unreadable output ({type(e).__name__})", "")


__all__ = ["FORMAT_ERROR_CODES", "FormatError", "one_tool_call", "parse_action"]
