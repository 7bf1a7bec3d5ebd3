"""The compact prompt: a short system prompt and one self-contained turn, for pretrained tokenizers.

The ``tools`` and ``json`` prompts are written for a tokenizer trained on them (the ``tiny`` and
``small`` presets: their fixed text costs a few dozen tokens). A pretrained tokenizer pays for all
of it: SmolLM2's splits every digit and every ``_`` of an id, so a ``single_trade`` turn costs it
about 2,800 tokens in tools mode (the 14 tool schemas in the system turn) and 1,200 in JSON mode.

The ``compact`` mode keeps what a seat needs to decide and nothing else:

- the **system prompt** states the goal, how to read a row, and the actions one line each, with the
  arguments each takes (no JSON schemas: under grammar-constrained decoding
  (:mod:`gpu_arena.llm.constrain`) the grammar writes the frame, the argument names and the legal
  ids; without it the reply is read by the same parser as the other modes);
- **one turn per prompt**: the conversation keeps the past, but the model is shown the system
  prompt and the current turn alone (``max_turns=1``). Every turn is complete for the present (the
  scripted teachers act on the current view alone, so nothing a decision needs is in older turns)
  and shows the news of the round once;
- a **turn** is the view as short rows: blocks as ``id gpus x [start,end) w<worth>`` (worth already
  counts reliability and energy for the seat, so those are left out where the decision aids are
  there), other labs' blocks by owner, offers as what the seat gets and gives; the blocks that
  idle unless allocated this turn (:func:`~gpu_arena.llm.prompts.due_blocks`) on the last line,
  next to the reply.

The reply is a tool call in the template's ``<tool_call>`` frame, as in ``tools`` mode: the same
grammar, the same reader, the same SFT records (with no tool schemas in them).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from ..core.types import ACTION_TYPES
from .prompts import RenderMemory, _energy, _fresh, _pct, due_blocks, offer_sides, plan_lines
from .tools import ACTION_FIELDS

_RULES = """\
You are an AI lab trading GPU blocks for your jobs: maximise value of jobs done - energy + money. A job needs GPU-h (gpus x rounds) by its deadline. Block: id gpus x start-end w=worth to you. Due now: idle unless allocated this turn.
Reply with one tool call:"""

# The arguments shown per action: the ones a decision is about (the grammar, or the parser, takes
# every argument of the action's tool; the rest are listed once above).
_SHOWN_ARGS: dict[str, tuple[str, ...]] = {
    "send_offer": ("target_lab_id", "block_ids", "requested_block_ids", "payment", "requested_payment", "job_id"),
    "counter_offer": ("offer_id", "..."),
    "make_pitch": ("payment", "job_id"),
    "counter_pitch": ("target_lab_id", "payment"),
    "form_coalition": ("job_id", "member_lab_ids", "shares", "block_ids"),
    "allocate_to_job": (),
}
# what an action's name and arguments do not already say
_NOTES: dict[str, str] = {
    "send_offer": "payment: $ you pay, requested_payment: $ you ask",
    "counter_offer": "as send_offer, replaces it",
    "reject_offer": "or withdraw yours",
    "form_coalition": "shares sum to 1",  # job_id alone: the Pool now line says so where it applies
    "allocate_to_job": "your best allocation",
}


@cache
def compact_system_prompt() -> str:
    """The compact mode's system prompt: the goal, how to read a block, one line per action."""
    lines = [_RULES]
    for t in ACTION_TYPES:
        args = _SHOWN_ARGS.get(t, ACTION_FIELDS[t])
        assert set(args) <= {*ACTION_FIELDS[t], "..."}, t  # a renamed field: say so here too
        note = f" {_NOTES[t]}" if t in _NOTES else ""
        lines.append(f"{t}({', '.join(args)}){note}")
    return "\n".join(lines)


def _num(x: float | None) -> str:
    """Money and worth with one decimal (a digit is a token to a pretrained tokenizer; a tenth of a
    dollar decides nothing here)."""
    if x is None:
        return "-"
    text = format(x, ".1f")
    return "0.0" if text == "-0.0" else text


def _signed(x: float) -> str:
    text = format(x, "+.1f")
    return "+0.0" if text == "-0.0" else text


def _useful(b: Any) -> bool:
    return b.marginal_value is not None and abs(b.marginal_value) >= 0.05  # shown as w0.0: worth nothing


def _window(b: Any) -> str:
    return f"{b.gpu_count}x{b.start_round}-{b.end_round}"


def _block(b: Any, *, own: bool, aids: bool) -> str:
    """A block as a short row: id, size and window, worth; reliability and energy only without aids
    (the worth counts them); status and notes of the seat's own blocks."""
    row = f"{b.block_id} {_window(b)}"
    if not aids:
        row += f" {_pct(b.reliability)} {_energy(b.energy_cost)}"
    elif _useful(b):
        row += f" w{_num(b.marginal_value)}"
    notes = []
    if own and b.status != "free":
        notes.append(b.status + (f" {b.job_id}" if b.job_id else ""))
    if b.coalition_id:
        notes.append(b.coalition_id)
    if b.no_resale or b.must_allocate:
        notes.append("no-resale")
    return row + (" " + " ".join(notes) if notes else "")


_GONE = ("done", "idle", "failed")


def _head(obs: Any, memory: RenderMemory) -> list[str]:
    out = [f"Round {obs.round_index}/{obs.max_rounds}. You {obs.controlled_lab_id}: ${_num(obs.controlled_lab_budget)},"
           f" BATNA {_num(obs.batna)}, surplus {_signed(obs.surplus_over_batna)}"]
    if memory.turns:
        res = obs.last_action_result
        out.append(f"Last: ok{' ' + res.message if res.message else ''}" if res.ok
                   else f"Last: ERROR {res.code}: {res.message}")
    return out


def _jobs(obs: Any) -> list[str]:
    out = []
    for j in obs.private_jobs:
        line = f"{j.job_id}: {j.gpu_hours_required} GPU-h by {j.deadline_round}, value {_num(j.value)}"
        if j.min_reliability:
            line += f", rel>={_pct(j.min_reliability, up=True)}"
        if j.assigned_hours:
            line += f", has {j.assigned_hours}"
        if j.status != "open":
            line += f", {j.status}"
        if j.pooled:
            line += " pooled" + (f" {j.coalition_id} share {_num(j.share)}" if j.coalition_id else "")
        out.append(line)
    return out


def _terms(blocks: list[str], money: float) -> str:
    parts = list(blocks) + ([f"${_num(money)}"] if money > 0 else [])
    return " ".join(parts) or "nothing"


def _offers(obs: Any) -> list[str]:
    out = []
    for o in obs.active_offers:
        who, get, give, money_in, money_out = offer_sides(o)
        line = (f"{o.offer_id} {who}: get {_terms(get, money_in)}, give {_terms(give, money_out)},"
                f" w{_signed(o.value_to_me)}, until {o.expires_round - 1}")
        conds = [k for k, v in sorted(o.conditions.items()) if v]
        if conds:
            line += f", {' '.join(conds)}"
        out.append(line)
    return out


def _coalitions(obs: Any) -> list[str]:
    out = []
    for c in obs.active_coalitions:
        consented = set(c.consented)
        members = " ".join(f"{m}{'*' if m in consented else ''}"
                           + (f"={_num(c.shares[m])}" if m in c.shares else "") for m in c.members)
        line = (f"Coalition {c.coalition_id} {c.status} by {c.proposer} for {c.job_id}: {c.gpu_hours_required} GPU-h"
                f" by {c.deadline_round}; members (*committed) {members}")
        if c.status == "proposed":
            line += f"; until {c.expires_round - 1}"
        out.append(line)
    return out


def render_compact_turn(obs: Any, memory: RenderMemory | None = None) -> str:
    """One compact turn: the seat's current state in short rows, and the news and messages not yet
    shown (``memory``, updated in place). Reads only ``obs`` (the seat's own view)."""
    memory = memory if memory is not None else RenderMemory()
    me = obs.controlled_lab_id
    market = obs.public_market
    tradeable = [b for b in market.blocks if b.tradeable and b.owner != me]
    live = [b for b in obs.owned_blocks if b.status not in _GONE]
    aids = any(b.marginal_value is not None for b in [*live, *tradeable])
    out = _head(obs, memory) + _jobs(obs)
    out.append("Yours: " + ("; ".join(_block(b, own=True, aids=aids) for b in live) or "none"))
    labs = {x.lab_id: x for x in obs.visible_labs if x.lab_id != me}
    owners: dict[str, list[Any]] = {}
    for b in tradeable:
        owners.setdefault(b.owner, []).append(b)
    for lab_id in sorted(set(labs) | set(owners)):
        lab = labs.get(lab_id)
        about = f"{lab_id}" + (f" ${_num(lab.budget)}" + (" finished" if lab.finished else "") if lab else "")
        blocks = "; ".join(_block(b, own=False, aids=aids) for b in owners.get(lab_id, []))
        out.append(about + (f": {blocks}" if blocks else ""))
    for a in market.auctions:
        bids = " ".join(f"{p.lab_id} {_num(p.bid)}" for p in a.pitches) or "none"
        out.append(f"Auction {a.auction_id} for {a.block_id}: {a.status}, closes {a.close_round}, bids {bids}"
                   + (f", won by {a.winner}" if a.winner else ""))
    for p in market.pooled_jobs:
        if p.status == "open":
            out.append(f"Pooled call: {p.owner} {p.job_id} {p.gpu_hours_required} GPU-h by {p.deadline_round}")
    out += _offers(obs) + _coalitions(obs)
    events = _fresh([(e.round_index, e.kind, e.text) for e in market.events], memory.events)
    if events:
        out.append("News: " + "; ".join(text for _r, _kind, text in events))
    msgs = _fresh([(m.round_index, m.sender, m.target, m.text) for m in obs.message_history], memory.messages)
    out += [f"{sender} says: {text}" for _r, sender, _target, text in msgs if sender != me]
    if getattr(obs, "done", False):
        out.append("The episode is over.")
    out += plan_lines(obs)
    due = due_blocks(obs)
    if due:
        # last, next to the reply: with a due note on the block's row instead, mid-prompt, SmolLM2's
        # SFT start lost twice as much to timing (decision 0038, S1 against S2), as the small model did
        # with the same aid several hundred tokens up (decision 0037)
        out.append("Due now: " + ", ".join(due))
    memory.turns += 1
    return "\n".join(out)


def prompt_tokens_per_turn(tokenizer: Any, mode: str, task: str, seeds: Iterable[int],
                           splits: Iterable[str] = ("train", "holdout"), policy: str = "rule_expert"
                           ) -> list[dict[str, Any]]:
    """What the prompt of every turn costs in ``tokenizer``'s tokens in prompt ``mode``: ``policy``
    plays lab_0 of each world (the world's archetypes the others), its moves written as a model in
    ``mode`` would answer, and each turn's prompt is what an agent sends then (the conversation's
    :meth:`~gpu_arena.llm.prompts.Conversation.messages`, the mode's tool schemas) rendered by the
    tokenizer's chat template with the generation prompt. One row per turn: ``split``, ``seed``,
    ``turn`` (0: the first) and ``tokens``."""
    from ..env import GpuArenaEnv
    from ..policies import make_policy
    from ..rollout import play_seat
    from .prompts import Conversation, prompt_tools, reply_format
    from .tools import render_reply

    tools = prompt_tools(mode)
    rows: list[dict[str, Any]] = []
    for split in splits:
        for seed in seeds:
            env = GpuArenaEnv(task=task, split=split)
            obs = env.reset(seed=seed)
            conv = Conversation(mode)  # type: ignore[arg-type]  # checked by Conversation
            driver = make_policy(policy, seed=seed)

            def choose(view: Any, current: Any, conv: Conversation = conv, driver: Any = driver,
                       split: str = split, seed: int = seed) -> Any:
                conv.observe(current)
                ids = tokenizer.apply_chat_template(conv.messages(), tools=tools, add_generation_prompt=True,
                                                    tokenize=True, return_dict=False)
                turn = conv.turns - 1
                rows.append({"split": split, "seed": seed, "turn": turn, "tokens": len(ids)})
                action = driver.act(view)
                conv.reply(*render_reply(action, reply_format(mode), f"call_{turn}"))
                return action

            play_seat(env, driver, obs, choose=choose)
    return rows


__all__ = ["compact_system_prompt", "prompt_tokens_per_turn", "render_compact_turn"]
