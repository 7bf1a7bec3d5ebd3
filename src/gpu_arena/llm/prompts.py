"""Prompts for language-model seats: the system prompt, one compact message per turn, and the
conversation that grows by what is new.

Everything rendered comes from the seat's own observation (a core ``SeatView`` or the wire
``ArenaObservation``; both have the same field names), so a prompt can never show another lab's
private values: a property test changes every other lab's job values and checks the rendering
does not move.

Turn messages are *complete for the present* and *incremental for the past*: every turn restates
the current state (jobs, blocks with windows, market, offers, coalitions, labs, decision aids:
BATNA, worth of each block and offer, best plan), because state can change in any way between
rounds and a model should not have to replay deltas; the past (events, messages) is shown once,
when it is new. The output is deterministic (fixed ordering and number formats) so snapshots and
prefix caches hold.

Every token counts (issue #6 keeps the hard task's JSON-mode prompt under 2,000 cl100k tokens on
every turn; decision 0013): the block-row legend lives in the system prompt, other labs' blocks
are grouped by the seat's job they would serve and shown as size, window and worth (the worth
counts their reliability and energy for the seat), and nothing is repeated within a turn.
"""

from __future__ import annotations

import copy
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..policies.expert import planned_blocks, promised_blocks
from .answering import take_line
from .buying import bid_line
from .pooling import pool_line
from .tools import json_mode_instruction

Mode = Literal["tools", "json", "compact"]
# tools: the action tools' schemas in the template's system turn, a reply is a tool call; json: the
# actions as a text list, a reply is one JSON object; compact (gpu_arena.llm.compact): a short system
# prompt and the current turn alone, for pretrained tokenizers, a reply is a tool call
MODES: tuple[str, ...] = ("tools", "json", "compact")
# how many exchanges a mode shows the model by default (None: the whole conversation)
WINDOW: dict[str, int | None] = {"tools": None, "json": None, "compact": 1}

_RULES = """\
You play one AI lab in GPU Arena, a market of scarce GPU blocks. Maximise utility = value of your completed jobs - energy paid + money gained. Each round all labs act at once, one action each; then the clock ticks.

Rules
- Block: gpus for rounds [start,end) (GPU-h = gpus x rounds), a reliability, an energy cost per GPU-h. Trade, reserve or commit it before its window starts; then it runs for its allocated job, or idles.
- Job (private): done when its allocated blocks give its GPU-h, each ending by its deadline and meeting its reliability floor; else partial credit pays that share of its value. Jobs settle at their deadline.
- Offer: blocks and/or money ($) between two labs, settled atomically when accepted, open expires_in rounds; a counter-offer replaces it.
- Pooled job: its owner proposes a coalition (members, committed blocks, value shares summing to 1); it forms when every member commits; withdrawing committed blocks is a breach.
- Shocks (failures, new supply, energy, reliability or deadline changes, emergency auctions) are announced when they happen. Auction pitches are judged against the truth.
- Reputation (public) falls with breaches, invalid actions and spam (repeated actions). An unreadable or invalid action wastes your turn with a small penalty.

Block rows: id gpus x [start,end) reliability e<energy per GPU-h> w<worth to you>, then status and notes. Market rows leave out reliability and energy: their worth to you counts both.
Decision aids: BATNA = your utility if you trade no more; worth = how much a block or offer would raise your position (alone); best plan = the best allocation of what you hold (allocate_to_job without fields applies it). Reward per round = the change of your position (scaled) + penalties, shown when not zero."""

_TOOLS_TAIL = "Act by calling exactly one of the provided tools per turn."


def system_prompt(mode: Mode = "tools") -> str:
    """The rules and the action space; the same for every seat and task (it caches well)."""
    _check(mode)
    if mode == "compact":
        from .compact import compact_system_prompt

        return compact_system_prompt()
    tail = _TOOLS_TAIL if mode == "tools" else json_mode_instruction()
    return f"{_RULES}\n\n{tail}"


def _check(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")


def reply_format(mode: str) -> Literal["tools", "json"]:
    """How a reply in ``mode`` is written: ``tools`` (a tool call; the ``<tool_call>`` frame as
    text) in tools and compact mode, ``json`` (one JSON object) in JSON mode."""
    _check(mode)
    return "json" if mode == "json" else "tools"


def prompt_tools(mode: str) -> list[dict[str, Any]] | None:
    """The tool schemas a prompt in ``mode`` carries (``tools=`` of the chat template or the
    request): the 14 action tools in tools mode, none in the others."""
    from .tools import action_tools

    _check(mode)
    return action_tools() if mode == "tools" else None


def _num(x: float | None, spec: str = ".2f") -> str:
    if x is None:
        return "-"
    text = format(x, spec)
    return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.00" from float noise


def _pct(x: float, *, up: bool = False) -> str:
    """Whole percent, rounded so a comparison on screen never flatters: block reliabilities round
    down and requirements up, so a block shown to meet a floor does meet it."""
    v = round(x * 100, 6)
    return f"{math.ceil(v) if up else math.floor(v)}%"


def _signed(x: float) -> str:
    text = format(x, "+.2f")
    return "+0.00" if text == "-0.00" else text


def _ids(ids: Iterable[str]) -> str:
    items = list(ids)
    return "[" + ", ".join(items) + "]" if items else "nothing"


def _terms(blocks: list[str], money: float) -> str:
    parts = [f"[{', '.join(blocks)}]"] if blocks else []
    if money > 0:
        parts.append(f"${_num(money)}")
    return " + ".join(parts) or "nothing"


_GONE = ("done", "idle", "failed")


def _energy(x: float) -> str:
    """Energy per GPU-h: ``e.51`` (a leading zero costs a token on every block row)."""
    text = _num(x)
    return "e" + (text[1:] if text.startswith("0.") else text)


def _spec(b: Any, *, energy: bool = True) -> str:
    """A block's public facts, ``id gpus x [start,end) reliability e<energy per GPU-h>`` (the
    system prompt gives the legend once; GPU-h is gpus x rounds, so it is not repeated)."""
    return (f"{b.block_id} {b.gpu_count}x[{b.start_round},{b.end_round}) {_pct(b.reliability)}"
            + (f" {_energy(b.energy_cost)}" if energy else ""))


def _useful(b: Any) -> bool:
    return b.marginal_value is not None and abs(b.marginal_value) >= 0.005  # below a cent: worth nothing to you


def due_blocks(obs: Any) -> list[str]:
    """The seat's own blocks that its best plan runs and that open next round, not yet allocated:
    this turn is the last in which they can be allocated (the clock ticks after it, and a block
    whose window starts unallocated idles). A decision aid read off the seat's own view: the
    teacher allocates exactly then, and a model that must compare every window with the round
    number to see it (the `small` SFT model, decision 0035) lets them idle. None once the episode
    is over."""
    if getattr(obs, "done", False):
        return []
    planned = planned_blocks(obs)
    r = obs.round_index
    return [b.block_id for b in obs.owned_blocks
            if b.status in ("free", "reserved") and b.start_round == r + 1 and b.block_id in planned]


def blocks_to_allocate(obs: Any) -> list[str]:
    """What an allocation this turn names, sorted: on a turn with :func:`due_blocks`, those and the
    plan's blocks opening the round after, not yet allocated (the teacher allocates both at once,
    leaving the next round free for trading); none on other turns. A named allocation of the
    teacher's is then a copy of this list: where the list held only the due blocks, RL on its
    improved moves taught a small model ids it could not read, and it wrote one pair of ids in any
    world (decision 0039). Blocks the seat committed to a coalition still gathering consents are
    left out (:func:`~gpu_arena.policies.expert.promised_blocks`), as the teacher leaves them."""
    if not due_blocks(obs):
        return []
    r = obs.round_index
    planned = planned_blocks(obs)
    promised = promised_blocks(obs)
    return sorted(b.block_id for b in obs.owned_blocks
                  if b.status in ("free", "reserved") and r + 1 <= b.start_round <= r + 2
                  and b.block_id in planned and b.block_id not in promised)


def _block_row(b: Any, *, own: bool) -> str:
    """One of the seat's blocks as a row: its facts, then status, notes and worth (for which job)."""
    row = _spec(b)
    notes = [] if b.status == "free" else [b.status + (f"->{b.job_id}" if own and b.job_id else "")]
    if own and b.reserved_for and not b.job_id:
        notes.append(f"for {b.reserved_for}")
    if b.coalition_id:
        notes.append(f"in {b.coalition_id}")
    if b.no_resale or b.must_allocate:
        notes.append("no-resale")
    if _useful(b):  # the job it serves is in the best plan line
        notes.append(f"w{_num(b.marginal_value)}")
    return row + (" " + ", ".join(notes) if notes else "")


def _market_row(b: Any, *, aids: bool) -> str:
    """Another lab's tradeable block as what it is to the seat: size, window and worth (the group
    names the job). The worth already counts the block's reliability against the seat's floors
    and the energy the seat would pay, so with decision aids those two are left out; without
    aids the row has every fact."""
    if not aids:
        return _spec(b)
    row = f"{b.block_id} {b.gpu_count}x[{b.start_round},{b.end_round})" + (
        f" w{_num(b.marginal_value)}" if _useful(b) else "")
    if b.coalition_id:
        row += f" in {b.coalition_id}"
    if b.no_resale or b.must_allocate:
        row += " no-resale"
    return row


def _market_lines(blocks: list[Any]) -> list[str]:
    """Other labs' tradeable blocks grouped by the seat's job each would serve (then by owner), so
    a job id is written once per group rather than once per block; blocks of no use come last."""
    groups: dict[str, dict[str, list[Any]]] = {}
    for b in blocks:
        key = (b.best_job or "your jobs") if _useful(b) else ""
        groups.setdefault(key, {}).setdefault(b.owner, []).append(b)
    aids = any(b.marginal_value is not None for b in blocks)
    if aids:
        label = {k: f"for {k}: " if k else "worth nothing to you alone: " for k in groups}
    else:
        label = {"": ""}  # no decision aids in this view: group by owner only
    order = sorted(groups, key=lambda k: (k == "", k))
    return [label[k] + " | ".join(f"{owner}: " + "; ".join(_market_row(b, aids=aids) for b in bs)
                                  for owner, bs in sorted(groups[k].items())) for k in order]


def _result_line(obs: Any) -> str:
    res = obs.last_action_result
    if res.ok:
        return f"Last action: ok{': ' + res.message if res.message else ''}"
    return f"Last action: ERROR {res.code}: {res.message}"


def _reward_line(obs: Any) -> str:
    breakdown = getattr(obs, "reward_breakdown", None) or {}
    parts = [f"{k.removesuffix('_score')} {v:+.4f}" for k, v in breakdown.items()
             if k != "normalized_reward" and abs(v) >= 5e-5]
    if not parts and abs(obs.reward or 0.0) < 5e-5:
        return ""  # a zero reward is the common case early on: the line would only cost tokens
    return f"Reward {(obs.reward or 0.0):+.4f}" + (f" ({', '.join(parts)})" if parts else "")


def offer_sides(o: Any) -> tuple[str, list[str], list[str], float, float]:
    """An offer seen from the seat: who it is from or to, the blocks the seat would get and give,
    and the money it would receive and pay (an incoming offer's blocks and payment come to it)."""
    incoming = o.direction == "incoming"
    get, give = (o.block_ids, o.requested_block_ids) if incoming else (o.requested_block_ids, o.block_ids)
    money_in, money_out = (o.payment, o.requested_payment) if incoming else (o.requested_payment, o.payment)
    return (f"from {o.sender}" if incoming else f"to {o.target}"), list(get), list(give), money_in, money_out


@dataclass
class RenderMemory:
    """What earlier turns of this conversation already showed (events and messages, as multisets)."""

    events: Counter[tuple[Any, ...]] = field(default_factory=Counter)
    messages: Counter[tuple[Any, ...]] = field(default_factory=Counter)
    turns: int = 0


def _fresh(items: list[tuple[Any, ...]], seen: Counter[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Items not shown yet; updates ``seen``. Duplicates (the same message twice) count separately."""
    now = Counter(items)
    out: list[tuple[Any, ...]] = []
    budget = {k: now[k] - seen.get(k, 0) for k in now}
    for it in reversed(items):  # the newest copies of a repeated item are the new ones
        if budget[it] > 0:
            out.append(it)
            budget[it] -= 1
    out.reverse()
    for k, n in now.items():
        seen[k] = max(seen.get(k, 0), n)
    return out


def plan_lines(obs: Any) -> list[str]:
    """The planners' lines, last in both prompts, next to the reply (decision 0037): the offer
    ``rule_expert`` would take, the coalition it would propose, the bid it would send. The teacher
    answers before it bids, so a turn with an offer to take shows no Bid line: it also keeps
    SmolLM2's largest `single_trade` prompt within 600 tokens (decision 0048)."""
    take = take_line(obs)
    return [line for line in (take, pool_line(obs), None if take else bid_line(obs)) if line]


def render_turn(obs: Any, memory: RenderMemory | None = None) -> str:
    """One turn's message: the seat's complete current state, plus events and messages not yet shown.

    ``memory`` (updated in place) remembers what earlier turns showed; without it everything
    visible counts as new. Reads only ``obs`` (the seat's own view).
    """
    memory = memory if memory is not None else RenderMemory()
    me = obs.controlled_lab_id
    out = [f"[{obs.task}] Round {obs.round_index}/{obs.max_rounds}. You are {me}: budget {_num(obs.controlled_lab_budget)},"
           f" reputation {_num(obs.controlled_lab_reputation)}, BATNA {_num(obs.batna)},"
           f" surplus so far {_signed(obs.surplus_over_batna)}."]
    if memory.turns:
        out.append(_result_line(obs))
        reward = _reward_line(obs)
        if reward:
            out.append(reward)
    out.append("Your jobs:")
    for j in obs.private_jobs:
        line = f"- {j.job_id}: {j.gpu_hours_required} GPU-h by round {j.deadline_round}, value {_num(j.value)}"
        if j.min_reliability:
            line += f", reliability>={_pct(j.min_reliability, up=True)}"
        if j.partial_credit:
            line += f", partial {_num(j.partial_credit)}"
        line += f", has {j.assigned_hours} h" + ("" if j.status == "open" else f", {j.status}")
        if j.pooled:
            line += " [pooled" + (f", {j.coalition_id} share {_num(j.share)}" if j.coalition_id else "") + "]"
        if j.realized_value:
            line += f", realised {_num(j.realized_value)}"
        out.append(line)
    live = [b for b in obs.owned_blocks if b.status not in _GONE]
    out.append("Your blocks:" if live else "Your blocks: none usable")
    out += [_block_row(b, own=True) for b in live]
    if obs.best_plan:
        out.append("Best plan: " + "; ".join(f"{j} <- {', '.join(bs)}" for j, bs in sorted(obs.best_plan.items())))
    market = obs.public_market
    tradeable = [b for b in market.blocks if b.tradeable and b.owner != me]
    if tradeable:
        out.append("Market (other labs' blocks you can ask for), by your job each would serve:")
        out += _market_lines(tradeable)
    for a in market.auctions:
        blk = next((b for b in market.blocks if b.block_id == a.block_id), None)
        spec = f" ({blk.gpu_count} GPU [{blk.start_round},{blk.end_round}), worth {_num(blk.marginal_value)})" \
            if blk is not None else ""
        bids = ", ".join(f"{p.lab_id} {_num(p.bid)}" + (f" score {_num(p.score)}" if p.score is not None else "")
                         for p in a.pitches) or "none"
        winner = f", won by {a.winner} at {_num(a.price)}" if a.winner else ""
        out.append(f"Auction {a.auction_id} for {a.block_id}{spec}: {a.status}, closes round {a.close_round};"
                   f" pitches: {bids}{winner}")
    for p in market.pooled_jobs:
        if p.status == "open":
            out.append(f"Pooled call: {p.owner}'s {p.job_id} needs {p.gpu_hours_required} GPU-h by round"
                       f" {p.deadline_round}, reliability>={_pct(p.min_reliability, up=True)}")
    if obs.active_offers:
        out.append("Open offers:")
    for o in obs.active_offers:
        who, you_get, you_give, money_in, money_out = offer_sides(o)
        line = (f"- {o.offer_id} {who}: you get {_terms(you_get, money_in)}, give {_terms(you_give, money_out)};"
                f" until round {o.expires_round - 1}; worth {_signed(o.value_to_me)}")
        conds = [k for k, v in sorted(o.conditions.items()) if v]
        if conds:
            line += f"; conditions {', '.join(conds)}"
        if o.parent_offer_id:
            line += f"; counters {o.parent_offer_id}"
        out.append(line)
    if obs.active_coalitions:
        out.append("Coalitions:")
    for c in obs.active_coalitions:
        line = (f"- {c.coalition_id} ({c.status}) by {c.proposer} for {c.job_id}: {c.gpu_hours_required} GPU-h by round"
                f" {c.deadline_round}")
        if c.payment:
            line += f"; pool payment {_num(c.payment)}"
        if c.status == "proposed":
            line += f"; open until round {c.expires_round - 1}"
        if c.breaches:
            line += f"; breached by {', '.join(c.breaches)}"
        # one entry per member (its consent, commitments and share) rather than three lists of members
        consented = set(c.consented)
        if c.commitments or c.shares:
            line += "; members (* consented) with commits and share: " + "; ".join(
                f"{m}{'*' if m in consented else ''} {_ids(c.commitments.get(m, []))}"
                + (f" {_num(c.shares[m])}" if m in c.shares else "") for m in c.members)
        else:
            line += "; members (* consented): " + ", ".join(f"{m}{'*' if m in consented else ''}" for m in c.members)
        out.append(line)
    others = [x for x in obs.visible_labs if x.lab_id != me]  # the first line already states yours
    if others:
        out.append("Other labs: " + "; ".join(
            f"{x.lab_id} ${_num(x.budget)} rep {_num(x.reputation)} {x.n_blocks} blocks" + (" finished" if x.finished else "")
            for x in others))
    events = _fresh([(e.round_index, e.kind, e.text) for e in market.events], memory.events)
    if events:
        out.append("News: " + "; ".join(f"r{r} {text}" for r, _kind, text in events))
    msgs = _fresh([(m.round_index, m.sender, m.target, m.text) for m in obs.message_history], memory.messages)
    for r, sender, target, text in msgs:
        if sender == me:
            continue  # the seat's own words are already in its own replies
        out.append(f"Message r{r} {sender}->{'you' if target == me else 'all'}: {text}")
    # last, next to the answer: a 4-layer model trained on whole coalition_market chats ignored this
    # line when the market, offers and coalitions stood between it and its reply (decision 0037)
    out += plan_lines(obs)
    allocate = blocks_to_allocate(obs)
    if allocate:
        out.append(f"Allocate now (opening within two rounds; next round's idle otherwise): {', '.join(allocate)}")
    if getattr(obs, "done", False):
        out.append("The episode is over.")
    memory.turns += 1
    return "\n".join(out)


class Conversation:
    """One seat's chat transcript for one episode, in OpenAI chat format (list of message dicts).

    ``observe(obs)`` appends what is new: in ``tools`` mode, after an assistant tool call, the new
    turn is that call's ``tool`` message (the action's result and the new state, as TRL's
    tool-calling environments do); otherwise a ``user`` message. ``reply(...)`` appends the
    assistant's answer. Earlier messages are never rewritten, so the transcript is a valid SFT
    sample and a stable prefix for KV caches.

    ``messages()`` returns what to send: the system prompt plus, with ``max_turns``, only the last
    ``max_turns`` exchanges (each turn restates the full state, so older turns only hold past
    news); ``max_turns`` defaults to the mode's :data:`WINDOW` (compact mode: the current turn
    alone, rendered by :func:`gpu_arena.llm.compact.render_compact_turn`). Not thread-safe: one
    conversation belongs to one seat of one episode.
    """

    def __init__(self, mode: Mode = "tools", *, system: str | None = None, max_turns: int | None = None) -> None:
        _check(mode)
        if max_turns is not None and max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.mode: Mode = mode
        self.max_turns = max_turns if max_turns is not None else WINDOW[mode]
        self.memory = RenderMemory()
        self.transcript: list[dict[str, Any]] = [{"role": "system", "content": system or system_prompt(mode)}]
        self._pending_call: dict[str, Any] | None = None
        self.last_round: int | None = None

    @property
    def turns(self) -> int:
        return self.memory.turns

    def observe(self, obs: Any) -> dict[str, Any]:
        """Append the turn message for ``obs`` and return it."""
        if self.mode == "compact":
            from .compact import render_compact_turn

            text = render_compact_turn(obs, self.memory)
        else:
            text = render_turn(obs, self.memory)
        if self._pending_call is not None:
            msg = {"role": "tool", "tool_call_id": self._pending_call["id"],
                   "name": self._pending_call["function"]["name"], "content": text}
        else:
            msg = {"role": "user", "content": text}
        self._pending_call = None
        self.last_round = obs.round_index
        self.transcript.append(msg)
        return msg

    def reply(self, content: str | None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Append the assistant's answer. Only the first tool call is kept: one action per round,
        and chat APIs require a tool result for every call in the history."""
        msg: dict[str, Any] = {"role": "assistant", "content": content or ""}
        if tool_calls and self.mode != "json":
            call = copy.deepcopy(tool_calls[0])
            call.setdefault("id", f"call_{self.turns}")
            call.setdefault("type", "function")
            msg["tool_calls"] = [call]
            self._pending_call = call
        self.transcript.append(msg)
        return msg

    def messages(self) -> list[dict[str, Any]]:
        """The request: system prompt + the kept turns (copies)."""
        body = self.transcript[1:]
        if self.max_turns is not None:
            starts = [i for i, m in enumerate(body) if m["role"] in ("user", "tool")]
            if len(starts) > self.max_turns:
                body = body[starts[-self.max_turns]:]
        out = [dict(self.transcript[0])] + [copy.deepcopy(m) for m in body]
        if len(out) > 1 and out[1]["role"] == "tool":  # its assistant call was cut: show it as a user turn
            out[1] = {"role": "user", "content": out[1]["content"]}
        return out


# cl100k-style pre-tokenisation: contractions, letter runs (with one leading non-letter), 1-3
# digit groups, punctuation runs, newlines, spaces. Every piece is at least one BPE token and on
# this kind of text (common words, short ids, numbers) most pieces are exactly one.
_PRETOKEN = re.compile(r"'(?:s|t|re|ve|m|ll|d)|[^\r\n\w]?[^\W\d_]+|_[^\W\d_]*|\d{1,3}| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def estimate_tokens(text: str) -> int:
    """An estimate of a typical BPE tokenizer's count (GPT-4's cl100k family): the number of its
    pre-tokenisation pieces. Offline, no vocabulary needed; a close lower bound on arena text."""
    return len(_PRETOKEN.findall(text))


def estimate_request_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """Estimated prompt tokens of a chat request: contents, tool-call arguments, tool schemas and
    about 4 tokens of chat-template framing per message."""
    import json

    n = 0
    for m in messages:
        n += 4 + estimate_tokens(str(m.get("content") or ""))
        for call in m.get("tool_calls") or []:
            n += estimate_tokens(json.dumps(call.get("function", {})))
    if tools:
        n += estimate_tokens(json.dumps(tools))
    return n


__all__ = ["MODES", "WINDOW", "Conversation", "Mode", "RenderMemory", "blocks_to_allocate", "due_blocks", "estimate_request_tokens", "estimate_tokens",
           "plan_lines", "prompt_tools", "render_turn", "reply_format", "system_prompt"]
