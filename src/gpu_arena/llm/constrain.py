"""Grammar-constrained decoding: a local model writes only actions its own observation allows.

A small model reads its state poorly: most of the `small` preset's refused turns named a block
whose window had opened, another lab's block as its own, or an offer it sent itself, and a few of
its answers were not JSON at all (decision 0020). This is RL's *action masking* (PettingZoo
observations carry an ``action_mask`` for the same reason) applied to a text action. For each turn
:func:`action_grammar` writes a grammar (Lark, compiled by `llguidance`) whose sentences are exactly
the replies the action parser reads as one of the actions the seat may take:

- the reply's frame: a ``<tool_call>`` block in tools mode, one JSON object in JSON mode;
- an action name only where every id field it requires has a legal value (no ``accept_offer``
  without an incoming offer, no ``release_capacity`` without a held block);
- in every id field only the ids the seat's own view offers for it (:func:`legal_ids`); a field with
  no legal id is left out; lists of 1 to as many ids as are legal;
- ``accept_offer`` only of an offer that can settle and does not lower the seat's position: its
  ``value_to_me`` (the exact change of the seat's potential if it settled now) is not negative;
- an offer names a block it gives or asks for (money goes with blocks, never alone), asks only
  for blocks the lab it is sent to owns (one alternative per target lab), and names no block one
  of the seat's open offers already gives or asks for (no offer sent twice);
- bounded prices, rounds and messages, so every sentence is finite: a reply has at most
  :attr:`ActionGrammar.max_bytes` bytes, and a decoder allowed that many tokens always finishes it.

Everything else (which action, which legal ids, prices, the order of nothing) stays the model's
choice, and the rules still judge the action. The sets come from the seat's view alone, never from
hidden state. Fields are written in the tool schema's order, the order the training data uses.

It is part of the evaluated policy, not a post-hoc filter: ``llm:hf:DIR?constrained=1`` decodes
this way in every evaluation, and the batched sampler (``constrained=True``) in every rollout, so a
trained model is measured with the decoder it was trained with.

The token masks are :mod:`gpu_arena.llm.matching`'s. :func:`generic_grammar` is the same grammar
with every id field open to any id: with :func:`fits_ids` it tells whether a reply is a sentence
of a turn's grammar without compiling that grammar (:func:`gpu_arena.llm.matching.reply_fits`).
"""

from __future__ import annotations

import itertools
import json
import zlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..core.types import ACTION_TYPES
from .buying import BID, BID_FORM
from .pooling import SHORT_FORM, pool_jobs
from .prompts import reply_format
from .tools import action_tools

# (action, field) -> which of the view's id lists may fill it
_OWN_FREE, _OWN_HELD, _MARKET, _INCOMING, _ACCEPTABLE, _ANY_OFFER, _JOBS, _POOLED, _LABS, _COALITIONS = (
    "own_free", "own_held", "market", "incoming", "acceptable", "any_offer", "jobs", "pooled", "labs", "coalitions")
# a new offer's blocks: none already in one of the seat's open offers (see legal_lists)
_UNOFFERED, _UNASKED = "own_unoffered", "market_unasked"
# the jobs a short ``form_coalition`` (its job alone, filled by the planner: llm.pooling) may name
POOLABLE = "poolable"
# the jobs a short ``send_offer`` (its job alone, the teacher's bid filled in: llm.buying) may name
BIDDABLE = "biddable"
FIELDS: dict[str, dict[str, str]] = {
    "allocate_to_job": {"block_ids": _OWN_FREE, "job_id": _JOBS},
    "reserve_capacity": {"block_ids": _OWN_FREE, "job_id": _JOBS},
    "release_capacity": {"block_ids": _OWN_HELD},
    "send_offer": {"target_lab_id": _LABS, "block_ids": _UNOFFERED, "requested_block_ids": _UNASKED,
                   "job_id": _JOBS},
    "counter_offer": {"offer_id": _INCOMING, "block_ids": _OWN_FREE, "requested_block_ids": _MARKET,
                      "job_id": _JOBS},
    "accept_offer": {"offer_id": _ACCEPTABLE, "job_id": _JOBS},
    "reject_offer": {"offer_id": _ANY_OFFER},
    "make_pitch": {"job_id": _JOBS},
    "counter_pitch": {"target_lab_id": _LABS, "job_id": _JOBS},
    "form_coalition": {"job_id": _POOLED, "member_lab_ids": _LABS, "block_ids": _OWN_FREE,
                       "requested_block_ids": _MARKET},
    "commit_to_coalition": {"coalition_id": _COALITIONS},
    "send_message": {"target_lab_id": _LABS},
}
assert set(FIELDS) <= set(ACTION_TYPES), "constrained fields name an unknown action"
_TRADEABLE = ("free", "reserved")
_HELD = ("reserved", "allocated", "committed")

# Bounds that make every reply finite. Wider than anything a policy of this project writes: prices
# up to 10^9 with four decimals, offers open for up to 99 rounds, messages of 120 printable ASCII
# characters (no quote or backslash, so nothing needs escaping).
NUMBER = r"/(0|[1-9][0-9]{0,8})(\.[0-9]{1,4})?/"
_NUMBER_BYTES = 14
ROUNDS = r"/[1-9][0-9]?/"
MESSAGE_CHARS = 120
MESSAGE = '"\\"" /[ !#-\\[\\]-~]{0,' + str(MESSAGE_CHARS) + '}/ "\\""'
CONDITIONS = ("must_allocate_to_job", "no_resale", "coalition_only")


def legal_lists(view: Any) -> dict[str, list[str]]:
    """The seat's legal ids by the view's list they come from (``own_free``, ``market``, ...: the
    values of :data:`FIELDS`; and ``market@LAB``, each lab's part of ``market``), in the view's
    order: its own blocks whose window has not opened (free or reserved: to allocate, reserve or
    give; held: to release), other labs' tradeable blocks not yet started, open offers addressed to
    it (those that can settle and are worth taking, :func:`worth_taking`, to accept; any open offer
    it is party to, to reject), its open jobs
    (the pooled ones, to form a coalition), the other labs still playing, coalitions proposed to it
    that it has not yet committed to.

    A new offer (``send_offer``) names no block that one of the seat's open offers already gives or
    asks for (``own_unoffered``, ``market_unasked``, and each lab's part of the latter): such an
    offer is the open one sent again (a repeat the spam check charges, 122 of a trained model's 388
    offers on `coalition_market`, decision 0041) or the same block promised twice. To change an
    open offer the seat rejects it first. ``rule_expert`` never sends one (0 of its 659 offers
    over validation seeds 0-99 of the three tasks). Nor does it ask for a block worth nothing to
    it (:func:`worth_asking`). ``poolable``: the job a ``form_coalition`` may
    name alone, the pooled-job planner filling the rest (:func:`gpu_arena.llm.pooling.pool_jobs`);
    ``biddable``: the job a ``send_offer`` may name alone, the teacher's bid filling the rest
    (:mod:`gpu_arena.llm.buying`).
    Works on a core ``SeatView`` and on the wire ``ArenaObservation`` alike (same field names)."""
    me, now = view.controlled_lab_id, view.round_index
    own = [b for b in view.owned_blocks if b.start_round > now]
    offers = [o for o in view.active_offers if o.status == "open"]
    jobs = [j for j in view.private_jobs if j.status == "open"]
    labs = [lab.lab_id for lab in view.visible_labs if lab.lab_id != me and not lab.finished]
    market = [b for b in view.public_market.blocks if b.owner != me and b.tradeable and b.start_round > now]
    mine = [o for o in offers if o.sender == me and now < o.expires_round]  # an expired one frees its blocks
    given = {b for o in mine for b in o.block_ids}
    asked = {b for o in mine for b in o.requested_block_ids}
    unasked = [b for b in market if b.block_id not in asked and worth_asking(b)]
    free = [b.block_id for b in own if b.status in _TRADEABLE]
    return {
        _OWN_FREE: free,
        _OWN_HELD: [b.block_id for b in own if b.status in _HELD],
        _MARKET: [b.block_id for b in market],
        _UNOFFERED: [b for b in free if b not in given],
        _UNASKED: [b.block_id for b in unasked],
        _INCOMING: [o.offer_id for o in offers if o.target == me],
        _ACCEPTABLE: [o.offer_id for o in offers if o.target == me and _can_settle(view, o) and worth_taking(o)],
        _ANY_OFFER: [o.offer_id for o in offers],
        _JOBS: [j.job_id for j in jobs],
        _POOLED: [j.job_id for j in jobs if j.pooled],
        POOLABLE: pool_jobs(view),
        BIDDABLE: BID.jobs(view),
        _LABS: labs,
        _COALITIONS: [c.coalition_id for c in view.active_coalitions
                      if c.status == "proposed" and me in c.members and me not in c.consented
                      and now < c.expires_round],
        # each lab's part of the market a new offer may ask for: an offer asks only for its target's blocks
        **{owned_by(lab): [b.block_id for b in unasked if b.owner == lab] for lab in labs},
    }


def owned_by(lab: str) -> str:
    """The :func:`legal_lists` key of ``lab``'s tradeable blocks a new offer may ask for (its part
    of ``market_unasked``)."""
    return f"{_MARKET}@{lab}"


def target_markets(lists: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Each target lab -> the market blocks an offer to it may ask for, from :func:`legal_lists`;
    empty for lists without them (then an offer may ask any target for any market block)."""
    if not all(owned_by(lab) in lists for lab in lists.get(_LABS, ())):
        return {}
    return {lab: list(lists[owned_by(lab)]) for lab in lists.get(_LABS, ())}


def by_action(lists: Mapping[str, list[str]]) -> dict[str, dict[str, list[str]]]:
    """For each constrained action, field -> its legal ids, from :func:`legal_lists`."""
    return {action: {f: lists[src] for f, src in fields.items()} for action, fields in FIELDS.items()}


def legal_ids(view: Any) -> dict[str, dict[str, list[str]]]:
    """For each constrained action, field -> the ids the seat's observation offers for it
    (:func:`legal_lists` by action)."""
    return by_action(legal_lists(view))


def worth_taking(offer: Any) -> bool:
    """Whether accepting ``offer`` leaves the seat's position no lower: its ``value_to_me``, the
    exact change of the seat's potential if the offer settled now, is not negative (a view without
    decision aids has none: every offer is). Why: trained models accepted offers that cost them (27
    of 76 accepts on `coalition_market` validation, their worth summing to -209.5) where
    ``rule_expert`` accepts none (0 of 178 over the three tasks), decision 0044. Rejecting such an
    offer, or countering it, stays open."""
    worth = getattr(offer, "value_to_me", None)
    return worth is None or worth >= -1e-9


def worth_asking(block: Any) -> bool:
    """Whether a new offer may ask for ``block``: its ``marginal_value``, the change of the seat's
    potential with the block, is above zero (a view without decision aids has none: every block
    is). Paying for a block that adds nothing is a pure loss, and asking for it spends the turn.
    Why: a trained model asked for 94 such blocks among 235 on `coalition_market` validation, where
    ``rule_expert`` asks for none (0 of 179; it asks only above 0.5), decision 0047. A counter-offer
    and a coalition keep every block."""
    worth = getattr(block, "marginal_value", None)
    return worth is None or worth > 1e-9


def _can_settle(view: Any, offer: Any) -> bool:
    """Whether an incoming open offer can settle as far as the seat's view tells: its sender still
    plays and can pay, the seat can pay what it asks, the blocks on both sides are still free, not
    started and not bought under a condition, and a ``coalition_only`` offer has a formed coalition
    behind it. What the view hides (another lab's ``must_allocate`` mark, a move settled earlier in
    the same round) stays the rules' to judge. Accepting an offer that cannot settle is refused
    and costs the turn (``offer_stale``); decision 0032 measured what this removes."""
    me, now, slack = view.controlled_lab_id, view.round_index, 1e-9
    labs = {lab.lab_id: lab for lab in view.visible_labs}
    sender = labs.get(offer.sender)
    if now >= offer.expires_round or sender is None or sender.finished or offer.payment > sender.budget + slack:
        return False
    if offer.requested_payment > view.controlled_lab_budget + slack:
        return False
    market = {b.block_id: b for b in view.public_market.blocks}
    for bid in offer.block_ids:
        b = market.get(bid)
        if b is None or b.owner != offer.sender or not b.tradeable or b.no_resale:
            return False
    own = {b.block_id: b for b in view.owned_blocks}
    for bid in offer.requested_block_ids:
        b = own.get(bid)
        if b is None or b.status != "free" or b.start_round <= now or b.no_resale or b.must_allocate:
            return False
    if offer.conditions.get("coalition_only"):
        return any(c.status == "formed" and me in c.members and offer.sender in c.members
                   for c in view.active_coalitions)
    return True


def _lit(text: str) -> str:
    """A Lark string literal that matches ``text`` exactly."""
    return json.dumps(text)


@dataclass(frozen=True, slots=True)
class _Piece:
    """A Lark expression, the most bytes a sentence of it has, and the named rules it refers to."""

    lark: str
    max_bytes: int
    rules: tuple[str, ...] = ()


def _choice(values: Sequence[str]) -> _Piece:
    """One of ``values`` as a JSON string."""
    quoted = [json.dumps(v) for v in values]
    return _Piece("(" + " | ".join(_lit(q) for q in quoted) + ")", max(len(q.encode()) for q in quoted))


def _some(one: _Piece, n: int, open_: str, close: str) -> _Piece:
    """1 to ``n`` of ``one`` joined by ``", "`` between ``open_`` and ``close``."""
    tail = f' ({_lit(", ")} {one.lark}){{0,{n - 1}}}' if n > 1 else ""
    return _Piece(f"{_lit(open_)} {one.lark}{tail} {_lit(close)}", 2 + n * one.max_bytes + (n - 1) * 2)


# lists the teacher writes in an order of its own (a coalition's blocks grouped by member): any order,
# a repeated id left to the rules
_ANY_ORDER = frozenset({"form_coalition"})


def _id_list(values: Sequence[str], name: str) -> _Piece:
    """A JSON list of 1 to ``len(values)`` distinct ``values``, in their order: the legal lists keep
    the view's order, which the teacher's lists follow, and the rules refuse a repeated id
    (``duplicate_ids``: the most frequent refusal left under the grammar, issue 31). ``name``: the
    rules' names, one per list of the view, so the actions that take one list share its rules (a
    grammar that repeated them compiled 5-16% slower). Two named rules an id: ``{name}_s{i}`` is a
    list that goes on from the i-th id or a later one, ``{name}_l{i}`` one that goes on from the
    i-th."""
    quoted = [_lit(json.dumps(v)) for v in values]
    n, sep = len(values), _lit(", ")
    rules = []
    for i, q in enumerate(quoted):
        more = f" ({sep} {name}_s{i + 1})?" if i + 1 < n else ""
        rules.append(f"{name}_l{i}: {q}{more}")
        rules.append(f"{name}_s{i}: {name}_l{i}" + (f" | {name}_s{i + 1}" if i + 1 < n else ""))
    longest = sum(len(json.dumps(v).encode()) for v in values) + 2 * (n - 1)
    return _Piece(f'"[" {name}_s0 "]"', 2 + longest, tuple(rules))


def _object(members: Sequence[tuple[str, _Piece, bool]], lead: bool) -> _Piece:
    """Object members ``(key, value, required)`` in their order, each optional one present or not,
    joined by ``", "``. ``lead``: a member was written before them (every one then starts with the
    separator). Without ``lead`` the first member written has none: one alternative per member
    that can come first."""
    written = [(f'{_lit(json.dumps(k) + ": ")} {v.lark}', len(json.dumps(k)) + 2 + v.max_bytes, req)
               for k, v, req in members]
    max_bytes = sum(b + 2 for _, b, _ in written)

    def rest(items: Sequence[tuple[str, int, bool]]) -> str:
        return " ".join(f'({_lit(", ")} {t})' + ("" if req else "?") for t, _, req in items)

    if lead:
        return _Piece(rest(written), max_bytes)
    alternatives = []
    for i, (text, _, req) in enumerate(written):
        alternatives.append(f"{text} {rest(written[i + 1:])}".strip())
        if req:  # a required member cannot be skipped: nothing after it can come first
            break
    else:
        alternatives.append("")  # every member optional: the empty object
    return _Piece("(" + " | ".join(f"({a})" if a else '""' for a in alternatives) + ")", max_bytes)


# an id list that stands for any id (generic_grammar): ids as the environment writes them
ANY_IDS = ("\x00any",)
_ANY_ID = _Piece('"\\"" /[A-Za-z0-9_.:-]{1,64}/ "\\""', 66)


def _value(action: str, name: str, schema: Mapping[str, Any], ids: Mapping[str, Sequence[str]],
           shares_keys: Sequence[str]) -> _Piece | None:
    """The grammar of one argument's value; None when it cannot be written (no legal id)."""
    if name in ids:
        values = ids[name]
        if not values:
            return None
        if tuple(values) == ANY_IDS:  # any number of any ids: fits_ids judges them
            if schema.get("type") != "array":
                return _ANY_ID
            return _Piece(f'"[" {_ANY_ID.lark} ({_lit(", ")} {_ANY_ID.lark})* "]"', 0)
        if schema.get("type") != "array":
            return _choice(values)
        if action in _ANY_ORDER:
            return _some(_choice(values), len(values), "[", "]")
        # one set of rules per list of the view, shared by the actions that take it; named by its
        # content too, so two different lists never share a name
        return _id_list(values, f"ids_{FIELDS[action][name]}_{zlib.crc32(chr(0).join(values).encode()):08x}")
    kind = schema.get("type")
    if name == "message":
        return _Piece(MESSAGE, MESSAGE_CHARS + 2)
    if name == "conditions":
        flags = [(c, _Piece('("true" | "false")', 5), False) for c in CONDITIONS]
        body = _object(flags, lead=False)
        return _Piece(f'"{{" {body.lark} "}}"', body.max_bytes + 2)
    if name == "shares":  # lab -> share, the labs in any order (a repeated key: the last counts)
        if not shares_keys:
            return None
        if tuple(shares_keys) == ANY_IDS:
            item = f"{_ANY_ID.lark} {_lit(': ')} {NUMBER}"
            return _Piece(f'"{{" {item} ({_lit(", ")} {item})* "}}"', 0)
        key = _choice(shares_keys)
        return _some(_Piece(f"{key.lark} {_lit(': ')} {NUMBER}", key.max_bytes + 2 + _NUMBER_BYTES),
                     len(shares_keys), "{", "}")
    if kind == "integer":
        return _Piece(ROUNDS, 2)
    if kind == "number":
        return _Piece(NUMBER, _NUMBER_BYTES)
    raise ValueError(f"no grammar for {action}.{name} ({kind})")  # a new tool field: give it one


@dataclass(frozen=True, slots=True)
class ActionGrammar:
    """The replies allowed on one turn: ``lark`` (an llguidance Lark grammar), the ``actions`` it
    offers, and ``max_bytes``, a bound on a reply's length (a decoder allowed that many new tokens
    always reaches the end of a sentence: every token writes at least one byte)."""

    lark: str
    actions: tuple[str, ...]
    max_bytes: int


@lru_cache(maxsize=1)
def _tool_parameters() -> dict[str, dict[str, Any]]:
    """Each action's tool parameters, in the tools' order (read, never changed)."""
    return {str(t["function"]["name"]): t["function"]["parameters"] for t in action_tools()}


# an offer names a block it gives or asks for (the rules refuse an empty one, ``empty_offer``: the
# most frequent refusal left under the grammar, decision 0033; money alone is a gift, decision 0042)
_OFFERS = frozenset({"send_offer", "counter_offer"})
_CONTENTS = ("block_ids", "requested_block_ids", "payment", "requested_payment")


def _offer(members: Sequence[tuple[str, _Piece, bool]], lead: bool) -> _Piece | None:
    """An offer's members (:func:`_object`'s, its required id first) where it names a block, given
    or asked; payments may go with them. One alternative per first list present, so the
    alternatives do not overlap. None when no block may be named.

    An offer of money alone gives a gift or asks for one: ``rule_expert_short`` sends none (0 of
    its 661 offers over validation seeds 0-99 of the three tasks), while 17 of a `small` SFT model's
    96 offers on 30 `coalition_market` episodes were money alone, most of them the same one again
    (charged as spam; decision 0042)."""
    first, rest = members[0], members[1:]
    contents = {name: piece for name, piece, _ in rest if name in _CONTENTS}
    after = [m for m in rest if m[0] not in _CONTENTS]
    assert first[2] and [m[0] for m in rest[:len(contents)]] == [n for n in _CONTENTS if n in contents], \
        "an offer's schema lists its id, then its contents"

    def item(name: str, piece: _Piece, optional: bool = False) -> str:
        text = f'{_lit(", ")} {_lit(json.dumps(name) + ": ")} {piece.lark}'
        return f"({text})?" if optional else text

    def then(names: Sequence[str]) -> list[str]:
        return [item(n, contents[n], optional=True) for n in names if n in contents]

    alternatives = []
    for k, name in enumerate(("block_ids", "requested_block_ids")):
        if name in contents:
            alternatives.append([item(name, contents[name]), *then(_CONTENTS[k + 1:])])
    if not alternatives:
        return None
    head = _object([first], lead)
    tail = _object(after, lead=True) if after else _Piece("", 0)
    either = "(" + " | ".join("(" + " ".join(a) + ")" for a in alternatives) + ")"
    return _Piece(f"{head.lark} {either} {tail.lark}".strip(), _object(members, lead).max_bytes)


# an offer asks only for blocks its target owns (the rules refuse another lab's: ``block_not_owned``,
# 160 of the 180 refused turns of a trained `small` model on coalition_market, decision 0036)
_ASKS_TARGET = frozenset({"send_offer"})


def _target_variants(legal: dict[str, list[str]], targets: Mapping[str, Sequence[str]]) -> list[dict[str, list[str]]]:
    """An offer's legal ids, one variant per target lab, each asking only for that lab's blocks (in
    the order of the legal list); the ids unchanged when the targets' blocks are not known."""
    labs = legal.get("target_lab_id") or []
    if not targets or not labs or tuple(labs) == ANY_IDS:
        return [legal]
    asked = legal.get("requested_block_ids") or []
    owned = {lab: set(targets.get(lab, ())) for lab in labs}
    return [{**legal, "target_lab_id": [lab], "requested_block_ids": [b for b in asked if b in owned[lab]]}
            for lab in labs]


@lru_cache(maxsize=8192)
def _action_rule(action: str, ids: tuple[tuple[str, tuple[str, ...]], ...], shares_keys: tuple[str, ...],
                 mode: str, targets: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> tuple[str, int] | None:
    """The grammar rule of one action given the legal ids of its fields (and, for an offer, each
    target's blocks), and the most bytes a sentence of it has; None when a required id has no legal
    value. Cached: from one turn to the next, and from one world of a task to another, most actions'
    ids are the same."""
    params = _tool_parameters()[action]
    required = set(params.get("required", ()))
    lead = mode != "tools"
    bodies: list[_Piece] = []
    helpers: dict[str, None] = {}
    for legal in _target_variants({k: list(v) for k, v in ids}, dict(targets)):
        members: list[tuple[str, _Piece, bool]] = []
        for name, schema in params["properties"].items():
            piece = _value(action, name, schema, legal, list(shares_keys))
            if piece is None:
                if name in required:
                    break  # a required id with no legal value: this variant is not offered
                continue
            members.append((name, piece, name in required))
        else:
            body = _offer(members, lead) if action in _OFFERS else _object(members, lead)
            if body is None:
                continue  # an offer with no block it may name: this variant is not offered
            helpers.update(dict.fromkeys(r for _, piece, _ in members for r in piece.rules))
            bodies.append(body)
    if not bodies:
        return None
    body = bodies[0] if len(bodies) == 1 else _Piece("(" + " | ".join(f"({b.lark})" for b in bodies) + ")",
                                                      max(b.max_bytes for b in bodies))
    if mode == "tools":
        head = f'<tool_call>\n{{"name": {json.dumps(action)}, "arguments": {{'
        tail = "}}\n</tool_call>"
    else:
        head = f'{{"action_type": {json.dumps(action)}'
        tail = "}"
    rule = f"a_{action}: {_lit(head)} {body.lark} {_lit(tail)}"
    return "\n".join([rule, *helpers]), len(head.encode()) + body.max_bytes + len(tail)


def _short_rule(mode: str, action: str, jobs: tuple[str, ...]) -> tuple[str, int]:
    """The rule of an ``action`` that names one of the ``jobs`` and nothing else (a planner fills
    the rest: :mod:`gpu_arena.llm.shortform`), and the most bytes a sentence of it has."""
    value = _ANY_ID if jobs == ANY_IDS else _choice(jobs)
    job = _object([("job_id", value, True)], lead=mode != "tools")
    if mode == "tools":
        head, tail = f'<tool_call>\n{{"name": {json.dumps(action)}, "arguments": {{', "}}\n</tool_call>"
    else:
        head, tail = f'{{"action_type": {json.dumps(action)}', "}"
    return (f"a_{action}_short: {_lit(head)} {job.lark} {_lit(tail)}",
            len(head.encode()) + job.max_bytes + len(tail))


def action_grammar(legal: Mapping[str, Mapping[str, Sequence[str]]], mode: str = "tools",
                   labs: Sequence[str] = (), targets: Mapping[str, Sequence[str]] | None = None,
                   pool: Sequence[str] = (), bid: Sequence[str] = ()) -> ActionGrammar:
    """The grammar of a reply in ``mode`` (``"tools"`` and ``"compact"``: the ``<tool_call>`` block
    of the Qwen2.5 template the checkpoints use; ``"json"``: one JSON object with ``action_type``)
    given the seat's :func:`legal_ids`. ``labs``: the keys a ``form_coalition``'s shares may name
    (the seat and its partners); without them shares are keyed by the partners alone. ``targets``:
    each lab -> its blocks an offer may ask for (:func:`target_markets`); without them an offer may
    ask any target for any market block. ``pool``: the jobs a ``form_coalition`` may name alone
    (:data:`POOLABLE`), the short form beside the full one; ``bid``: those a ``send_offer`` may
    name alone (:data:`BIDDABLE`)."""
    mode = reply_format(mode)  # the prompt modes' reply frames: an unknown mode is refused here
    partners = legal.get("form_coalition", {}).get("member_lab_ids", [])
    shares_keys = list(labs) or list(partners)
    rules: dict[str, None] = {}  # the rules' lines in order, each once (actions share list rules)
    actions: list[str] = []
    longest = 0
    for action in _tool_parameters():
        ids = legal.get(action, {})
        asks = tuple((lab, tuple(v)) for lab, v in (targets or {}).items()) if action in _ASKS_TARGET else ()
        rule = _action_rule(action, tuple((k, tuple(v)) for k, v in ids.items()), tuple(shares_keys), mode, asks)
        if rule is not None:
            rules.update(dict.fromkeys(rule[0].split("\n")))
            actions.append(action)
            longest = max(longest, rule[1])
    starts = [f"a_{a}" for a in actions]
    for action, jobs in ((SHORT_FORM, pool), (BID_FORM, bid)):
        if jobs:
            short, short_bytes = _short_rule(mode, action, tuple(jobs))
            rules[short] = None
            starts.append(f"a_{action}_short")
            actions += [] if action in actions else [action]
            longest = max(longest, short_bytes)
    start = "start: " + " | ".join(starts)
    return ActionGrammar("\n".join([start, *rules]), tuple(actions), longest)


@lru_cache(maxsize=8)
def generic_grammar(mode: str = "tools") -> ActionGrammar:
    """Every action's grammar in ``mode`` with each id field open to any id (any number of them in
    a list) and every action offered: a sentence of a turn's grammar is a sentence of this one
    whose ids :func:`fits_ids` accepts, and the other way round (tested). Compiled once, it checks
    a reply against any turn (its ``max_bytes`` bounds nothing)."""
    legal = {action: dict.fromkeys(fields, ANY_IDS) for action, fields in FIELDS.items()}
    return action_grammar(legal, mode, ANY_IDS, pool=ANY_IDS, bid=ANY_IDS)


_SHORT_LISTS = {SHORT_FORM: POOLABLE, BID_FORM: BIDDABLE}


def fits_ids(action: str, arguments: Mapping[str, Any], lists: Mapping[str, Sequence[str]]) -> bool:
    """Whether a reply that :func:`generic_grammar` reads as ``action`` with ``arguments`` is also a
    sentence of the turn's grammar, the seat's legal ids being ``lists`` (:func:`legal_lists`): the
    action is offered (each required id has a legal value), every id is legal, and a list holds
    distinct ids in the view's order (any order, at most as many as are legal, for
    ``form_coalition``), and an offer asks only for its target's blocks. A reply with ``shares``
    is not judged here (False): its repeated keys do not survive JSON. A ``form_coalition`` with
    its job alone fits when the job is :data:`POOLABLE`, a ``send_offer`` when it is
    :data:`BIDDABLE`."""
    if action in _SHORT_LISTS and list(arguments) == ["job_id"]:
        return arguments["job_id"] in lists.get(_SHORT_LISTS[action], ())
    params = _tool_parameters().get(action)
    if params is None or "shares" in arguments:
        return False
    fields = FIELDS.get(action, {})
    if any(name in fields and not lists[fields[name]] for name in params.get("required", ())):
        return False  # the action is not offered this turn
    for name, value in arguments.items():
        if name not in fields:
            continue
        allowed = lists[fields[name]]
        if not isinstance(value, list):
            if value not in allowed:
                return False
        elif action in _ANY_ORDER:
            if len(value) > len(allowed) or any(v not in allowed for v in value):
                return False
        else:  # distinct and in the view's order: each id after the one before it
            at = {v: i for i, v in enumerate(allowed)}
            places = [at.get(v, -1) for v in value]
            if -1 in places or any(b <= a for a, b in itertools.pairwise(places)):
                return False
    # an offer asks only for blocks its target owns (its target is legal by now; lists that do not
    # say who owns what leave it open, as the grammar does)
    owned = lists.get(owned_by(str(arguments.get("target_lab_id")))) if action in _ASKS_TARGET else None
    return owned is None or all(b in owned for b in arguments.get("requested_block_ids") or ())


_SEAT_GRAMMARS: OrderedDict[str, ActionGrammar] = OrderedDict()
_SEAT_GRAMMARS_KEPT = 4096


def seat_grammar(view: Any, mode: str = "tools") -> ActionGrammar:
    """The grammar of a reply for the seat whose observation is ``view``."""
    return grammar_of(legal_lists(view), view.controlled_lab_id, mode)


def grammar_of(lists: Mapping[str, list[str]], seat: str, mode: str = "tools") -> ActionGrammar:
    """The grammar of a reply for ``seat`` whose legal ids are ``lists`` (:func:`legal_lists`).
    Kept by the lists it is built from (a grammar is a function of them alone; worlds of a task
    name their blocks, jobs and labs alike, so many turns repeat one)."""
    key = json.dumps([lists, seat, mode], sort_keys=True)
    hit = _SEAT_GRAMMARS.get(key)
    if hit is not None:
        _SEAT_GRAMMARS.move_to_end(key)
        return hit
    _SEAT_GRAMMARS[key] = grammar = action_grammar(by_action(lists), mode, [seat, *lists[_LABS]],
                                                   target_markets(lists), lists.get(POOLABLE, ()),
                                                   lists.get(BIDDABLE, ()))
    if len(_SEAT_GRAMMARS) > _SEAT_GRAMMARS_KEPT:
        _SEAT_GRAMMARS.popitem(last=False)
    return grammar


__all__ = ["ANY_IDS", "BIDDABLE", "FIELDS", "POOLABLE", "ActionGrammar", "action_grammar", "by_action", "fits_ids", "generic_grammar",
           "grammar_of", "legal_ids", "legal_lists", "owned_by", "seat_grammar", "target_markets", "worth_asking", "worth_taking"]
