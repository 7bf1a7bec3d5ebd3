"""The action space as tools: one JSON schema per action type, derived from ``ArenaAction``.

Each action type becomes one OpenAI-style function tool whose parameters are exactly the
``ArenaAction`` fields that type reads (the rules ignore the others). The property schemas are
taken from ``ArenaAction.model_json_schema()``, so a change to the wire model changes the tools;
only the per-type field lists, the required fields and the one-line descriptions are written here,
and a test checks them against the model and the rules.

Models without tool calling get :func:`json_mode_instruction`: the same schemas as a compact
plain-text list, asking for one JSON object with ``action_type``.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

from ..core.types import ACTION_TYPES
from ..models import ArenaAction

# Which ArenaAction fields each action type reads (decision 0002); order is the order shown to models.
_OFFER_TERMS = ("block_ids", "requested_block_ids", "payment", "requested_payment", "expires_in",
                "conditions", "job_id", "message")
ACTION_FIELDS: dict[str, tuple[str, ...]] = {
    "send_offer": ("target_lab_id", *_OFFER_TERMS),
    "accept_offer": ("offer_id", "job_id"),
    "reject_offer": ("offer_id",),
    "counter_offer": ("offer_id", *_OFFER_TERMS),
    "make_pitch": ("payment", "job_id", "message"),
    "counter_pitch": ("target_lab_id", "payment", "job_id", "message"),
    "reserve_capacity": ("block_ids", "job_id"),
    "release_capacity": ("block_ids",),
    "form_coalition": ("job_id", "member_lab_ids", "block_ids", "requested_block_ids", "shares", "payment",
                       "expires_in", "message"),
    "commit_to_coalition": ("coalition_id",),
    "allocate_to_job": ("job_id", "block_ids"),
    "send_message": ("message", "target_lab_id"),
    "wait": (),
    "finish": (),
}
# Fields without which the rules always refuse the action (``missing_field``).
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "send_offer": ("target_lab_id",),
    "accept_offer": ("offer_id",),
    "reject_offer": ("offer_id",),
    "counter_offer": ("offer_id",),
    "counter_pitch": ("target_lab_id", "payment"),
    "reserve_capacity": ("block_ids", "job_id"),
    "release_capacity": ("block_ids",),
    "form_coalition": ("job_id", "member_lab_ids", "shares"),
    "commit_to_coalition": ("coalition_id",),
    "send_message": ("message",),
}
ACTION_DESCRIPTIONS: dict[str, str] = {
    "send_offer": ("Offer another lab your blocks and/or money for their blocks and/or money."
                   " With job_id alone, the bid on the 'Bid now' line."),
    "accept_offer": "Accept an incoming offer (job_id: your job that gets its blocks).",
    "reject_offer": "Reject an incoming offer, or withdraw your own.",
    "counter_offer": "Answer an incoming offer with new terms (replaces it).",
    "make_pitch": "Bid for the emergency-auction block, with a pitch.",
    "counter_pitch": "Outbid a rival's auction pitch.",
    "reserve_capacity": "Earmark your free blocks for your job (untradeable until released).",
    "release_capacity": "Release your reserved, allocated or committed blocks (a commitment: breach).",
    "form_coalition": ("Propose a coalition for your pooled job; shares cover every member and you, sum 1."
                       " With job_id alone, the plan on the 'Pool now' line."),
    "commit_to_coalition": "Consent to a coalition proposal.",
    "allocate_to_job": "Allocate your blocks to your job; no arguments: apply your best plan.",
    "send_message": "Message one lab (target_lab_id) or all.",
    "wait": "Do nothing this round.",
    "finish": "Stop negotiating: your blocks follow your best plan; afterwards you only wait.",
}

_SKIP_KEYS = ("title", "default")


def _simplify(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop what only costs prompt tokens: titles, defaults, and the ``null`` branch of optionals
    (an omitted argument is the null; a model need not be told it may send null)."""
    out = {k: v for k, v in schema.items() if k not in _SKIP_KEYS}
    any_of = out.pop("anyOf", None)
    if any_of is not None:
        branches = [b for b in any_of if b.get("type") != "null"]
        if len(branches) == 1:
            out = {**_simplify(branches[0]), **out}
        else:
            out["anyOf"] = [_simplify(b) for b in branches]
    if isinstance(out.get("items"), dict):
        out["items"] = _simplify(out["items"])
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _simplify(out["additionalProperties"])
    return out


@cache
def _field_schemas() -> dict[str, dict[str, Any]]:
    props: dict[str, dict[str, Any]] = ArenaAction.model_json_schema()["properties"]
    return {name: _simplify(s) for name, s in props.items() if name not in ("metadata", "action_type")}


def action_schema(action_type: str) -> dict[str, Any]:
    """The JSON schema of one action type's arguments (an object; ``additionalProperties: false``)."""
    if action_type not in ACTION_FIELDS:
        raise ValueError(f"unknown action type {action_type!r}")
    fields = _field_schemas()
    return {
        "type": "object",
        "properties": {name: copy.deepcopy(fields[name]) for name in ACTION_FIELDS[action_type]},
        "required": list(REQUIRED_FIELDS.get(action_type, ())),
        "additionalProperties": False,
    }


@cache
def _tools() -> tuple[str, ...]:
    return tuple(json.dumps({"type": "function", "function": {
        "name": t, "description": ACTION_DESCRIPTIONS[t], "parameters": action_schema(t)}})
        for t in ACTION_TYPES)


def action_tools() -> list[dict[str, Any]]:
    """The 14 actions as OpenAI-style function tools (``tools=`` of a chat completion request, or of
    ``tokenizer.apply_chat_template``). A fresh copy on every call."""
    return [json.loads(t) for t in _tools()]


def _type_mark(schema: dict[str, Any]) -> str:
    """A short type hint: ``[]`` for lists, ``{}`` for objects, ``#`` for numbers, nothing for text."""
    kind = schema.get("type")
    return {"array": "[]", "object": "{}", "number": "#", "integer": "#", "boolean": "?"}.get(str(kind), "")


# Notes for the JSON mode list, where the tool descriptions would cost too much: only what the
# action's name and fields do not already say.
_JSON_NOTES: dict[str, str] = {
    "accept_offer": "job_id: your job that gets its blocks",
    "reject_offer": "on your own offer: withdraw it",
    "counter_offer": "replaces the offer",
    "make_pitch": "bid for the auction block",
    "release_capacity": "releasing a commitment is a breach",
    "form_coalition": "shares for every member and you, summing to 1; job_id alone: the Pool now plan",
    "allocate_to_job": "no fields: apply your best plan",
    "send_message": "no target_lab_id: to all",
    "finish": "stop; your blocks follow your best plan",
}


@cache
def json_mode_instruction() -> str:
    """The plain-text action format for models without tool calling (same fields as the tools)."""
    lines = [
        "Answer with exactly one JSON object and nothing else, e.g."
        ' {"action_type": "send_offer", "target_lab_id": "lab_1", "requested_block_ids": ["b_1_0"], "payment": 12.5}',
        "Actions and fields (* required, [] list of ids, {} object, # number; omit the rest):",
    ]
    offer_terms = ", ".join(f"{name}{_type_mark(s)}" for name, s in action_schema("send_offer")["properties"].items()
                            if name != "target_lab_id")
    for t in ACTION_TYPES:
        schema = action_schema(t)
        required = set(schema["required"])
        args = ", ".join(f"{name}{'*' if name in required else ''}{_type_mark(s)}"
                         for name, s in schema["properties"].items())
        if t == "counter_offer" and ACTION_FIELDS[t][1:] == ACTION_FIELDS["send_offer"][1:]:
            assert args.endswith(offer_terms)  # the same terms as send_offer: named once
            args = args.removesuffix(offer_terms) + "the terms of send_offer"
        note = f" - {_JSON_NOTES[t]}" if t in _JSON_NOTES else ""
        lines.append(f"{t}({args}){note}")
    lines.append("payment: $ you pay; requested_payment: $ you ask; conditions keys: must_allocate_to_job,"
                 " no_resale, coalition_only (true/false); shares: lab id -> share.")
    return "\n".join(lines)


__all__ = [
    "ACTION_DESCRIPTIONS",
    "ACTION_FIELDS",
    "REQUIRED_FIELDS",
    "UnreadableAction",
    "action_arguments",
    "action_schema",
    "action_tools",
    "json_mode_instruction",
    "render_reply",
]


class UnreadableAction(ValueError):
    """An action with no reply to write: a policy returned something the core cannot read."""


def action_arguments(action: Any) -> tuple[str, dict[str, Any]]:
    """``(action_type, arguments)`` of a core ``Action`` or ``ArenaAction``: the non-default fields
    the type reads (:data:`ACTION_FIELDS`), in the tool schema's order."""
    from ..core.records import action_to_dict
    from ..core.serialize import coerce_action
    from ..core.types import RejectedAction

    core = coerce_action(action)
    if isinstance(core, RejectedAction):
        raise UnreadableAction(f"the policy returned an unreadable action ({core.code}: {core.message})")
    data = action_to_dict(core)
    kind = str(data.pop("action_type"))
    return kind, {name: data[name] for name in ACTION_FIELDS[kind] if name in data}


def render_reply(action: Any, mode: str, call_id: str) -> tuple[str, list[dict[str, Any]] | None]:
    """The assistant message an agent in ``mode`` would send for ``action``: ``(content, tool_calls)``.

    Tools and compact mode: no text and one function call whose ``arguments`` is a JSON object (a
    dict, the Hugging Face chat-template convention). JSON mode: the action as one JSON object."""
    kind, args = action_arguments(action)
    if mode in ("tools", "compact"):
        return "", [{"id": call_id, "type": "function", "function": {"name": kind, "arguments": args}}]
    return json.dumps({"action_type": kind, **args}), None

