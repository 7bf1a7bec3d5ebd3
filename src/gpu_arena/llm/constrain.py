"""Id-constrained decoding: a local model writes only ids its own observation offers.

A small model reads its state poorly: most of the `small` preset's refused turns name a block
whose window has opened, another lab's block as its own, or an offer it sent itself (decision
0020). This is RL's *action masking* (PettingZoo observations carry an ``action_mask`` for the
same reason) applied to a text action: while the model writes the JSON value of an id field —
``block_ids``, ``requested_block_ids``, ``offer_id``, ``job_id``, ``target_lab_id`` — of a known
action, a logits processor lets through only tokens that continue one of the ids the seat's own
observation lists for that field (:func:`legal_ids`); everything else (which action, which of the
legal ids, prices, the JSON around them) stays the model's choice, and the rules still judge the
action. The sets come from the seat's view alone, never from hidden state.

It is part of the evaluated policy, not a post-hoc filter: ``llm:hf:DIR?constrained=1`` decodes
this way in every evaluation, and the batched sampler (``constrained=True``) in every rollout, so a
trained model is measured with the decoder it was trained with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.types import ACTION_TYPES

# (action, field) -> which of the view's id lists may fill it
_OWN_FREE, _OWN_HELD, _MARKET, _INCOMING, _ANY_OFFER, _JOBS, _LABS = (
    "own_free", "own_held", "market", "incoming", "any_offer", "jobs", "labs")
FIELDS: dict[str, dict[str, str]] = {
    "allocate_to_job": {"block_ids": _OWN_FREE, "job_id": _JOBS},
    "reserve_capacity": {"block_ids": _OWN_FREE, "job_id": _JOBS},
    "release_capacity": {"block_ids": _OWN_HELD},
    "send_offer": {"target_lab_id": _LABS, "block_ids": _OWN_FREE, "requested_block_ids": _MARKET,
                   "job_id": _JOBS},
    "counter_offer": {"offer_id": _INCOMING, "block_ids": _OWN_FREE, "requested_block_ids": _MARKET,
                      "job_id": _JOBS},
    "accept_offer": {"offer_id": _INCOMING, "job_id": _JOBS},
    "reject_offer": {"offer_id": _ANY_OFFER},
}
assert set(FIELDS) <= set(ACTION_TYPES), "constrained fields name an unknown action"
_TRADEABLE = ("free", "reserved")
_HELD = ("reserved", "allocated", "committed")

# the action being written, then an id field's string value being typed (partial value captured)
_ACTION = re.compile(r'"(?:name|action_type)"\s*:\s*"([a-z_]+)"')
_IN_LIST = re.compile(r'"([a-z_]+)"\s*:\s*\[(?:\s*"[^"]*"\s*,)*\s*"([^"]*)$')
_IN_STRING = re.compile(r'"([a-z_]+)"\s*:\s*"([^"]*)$')


def legal_ids(view: Any) -> dict[str, dict[str, list[str]]]:
    """For each constrained action, field -> the ids the seat's observation offers for it: its own
    blocks whose window has not opened (free or reserved: to allocate, reserve or give; held: to
    release), other labs' tradeable blocks not yet started, open offers addressed to it (any open
    offer it is party to, to reject), its open jobs, the other labs still playing. Works on a core
    ``SeatView`` and on the wire ``ArenaObservation`` alike (same field names)."""
    me, now = view.controlled_lab_id, view.round_index
    own = [b for b in view.owned_blocks if b.start_round > now]
    offers = [o for o in view.active_offers if o.status == "open"]
    lists = {
        _OWN_FREE: [b.block_id for b in own if b.status in _TRADEABLE],
        _OWN_HELD: [b.block_id for b in own if b.status in _HELD],
        _MARKET: [b.block_id for b in view.public_market.blocks
                  if b.owner != me and b.tradeable and b.start_round > now],
        _INCOMING: [o.offer_id for o in offers if o.target == me],
        _ANY_OFFER: [o.offer_id for o in offers],
        _JOBS: [j.job_id for j in view.private_jobs if j.status == "open"],
        _LABS: [lab.lab_id for lab in view.visible_labs if lab.lab_id != me and not lab.finished],
    }
    return {action: {f: lists[src] for f, src in fields.items()} for action, fields in FIELDS.items()}


def open_field(text: str) -> tuple[str, str, str] | None:
    """``(action, field, partial)`` when ``text`` (a reply so far) ends inside the string value of an
    id field of a known action, else None."""
    actions = _ACTION.findall(text)
    if not actions:
        return None
    action = actions[-1]
    for pattern in (_IN_LIST, _IN_STRING):
        m = pattern.search(text)
        if m is not None and m.start() > text.rfind('"' + action + '"'):
            return action, m.group(1), m.group(2)
    return None


class TokenIndex:
    """A tokenizer's vocabulary as text: every token's string and, for each string prefix, the
    tokens that start with it (so the tokens that can continue a partial id are found by lookups,
    not by a scan of the vocabulary)."""

    def __init__(self, tokenizer: Any) -> None:
        size = len(tokenizer)
        self.text: list[str] = [tokenizer.decode([i]) for i in range(size)]
        self.exact: dict[str, list[int]] = {}
        self.starting: dict[str, list[int]] = {}
        for i, s in enumerate(self.text):
            if not s:
                continue
            self.exact.setdefault(s, []).append(i)
            for k in range(1, len(s) + 1):
                self.starting.setdefault(s[:k], []).append(i)

    def continuing(self, partial: str, values: Sequence[str]) -> set[int]:
        """Tokens after which the value typed so far (``partial``) is still the beginning of one of
        ``values`` followed by its closing quote, or which close such a value (and may go on past
        the quote: ``"]``, ``",``)."""
        out: set[int] = set()
        for v in values:
            full = v + '"'
            if not full.startswith(partial):
                continue
            rest = full[len(partial):]
            for k in range(1, len(rest)):
                out.update(self.exact.get(rest[:k], ()))
            out.update(self.starting.get(rest, ()))
        return out


_INDEX_ATTR = "_gpu_arena_token_index"


def token_index(tokenizer: Any) -> TokenIndex:
    """One :class:`TokenIndex` per tokenizer object (building it decodes the whole vocabulary), kept
    on the tokenizer itself: a cache keyed by ``id()`` would hand a new tokenizer the index of a
    freed one that had the same id."""
    index = getattr(tokenizer, _INDEX_ATTR, None)
    if index is None:
        index = TokenIndex(tokenizer)
        setattr(tokenizer, _INDEX_ATTR, index)
    return index


class IdConstraint:
    """A ``transformers`` logits processor for a batch of replies: row ``r`` may only write ids from
    ``legal[r]`` (:func:`legal_ids`) while it is inside an id field's value. ``prompt_width`` is
    where the generated tokens start in ``input_ids`` (left-padded batches share it). A row whose
    field has no legal id, or whose partial value matches none, is left alone: the rules refuse it
    as they would have."""

    def __init__(self, tokenizer: Any, legal: Sequence[Mapping[str, Mapping[str, Sequence[str]]] | None],
                 prompt_width: int) -> None:
        self.tokenizer = tokenizer
        self.index = token_index(tokenizer)
        self.legal = list(legal)
        self.prompt_width = prompt_width

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        for row, allowed in enumerate(self.legal):
            if not allowed:
                continue
            text = self.tokenizer.decode(input_ids[row, self.prompt_width:], skip_special_tokens=False)
            where = open_field(text)
            if where is None:
                continue
            action, name, partial = where
            values = (allowed.get(action) or {}).get(name)
            if not values:
                continue
            keep = self.index.continuing(partial, values)
            if not keep:
                continue
            mask = scores.new_full((scores.shape[-1],), float("-inf"))
            ids = [i for i in keep if i < scores.shape[-1]]
            mask[ids] = 0.0
            scores[row] = scores[row] + mask
        return scores


__all__ = ["FIELDS", "IdConstraint", "TokenIndex", "legal_ids", "open_field", "token_index"]
