"""A conversation's prompt as token ids that grow by each turn, not re-rendered from the start.

Today's loop rendered the whole chat (system prompt, every tool schema, every turn so far) with the
chat template and tokenized all of it on every turn: most of the environment side's cost per turn
(decision 0027). A :class:`ChatTokens` keeps the ids of the prompt so far and, per turn, renders
only what the turn adds (the assistant's reply, the new tool or user message and the generation
prompt) with the same template, tokenizes that piece alone and appends it.

That is exact only where the template and the tokenizer allow it: the render of a longer chat must
start with the render of the shorter one (chat templates of the ChatML family do: the generation
prompt is how an assistant turn starts), the piece a turn adds must not depend on turns further
back than the one before it, and the tokenizer must not merge across the seam. :func:`incremental`
checks all three once per tokenizer on a probe conversation of real arena turns (with tool calls)
against the full render; where any fails, :class:`ChatTokens` renders the whole chat each turn, as
before, and says so (``mode == "full"``): slower, never different.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

_ATTR = "_gpu_arena_incremental_chat"
_STUB_SYSTEM = {"role": "system", "content": "."}


def _render(tok: Any, messages: Sequence[dict[str, Any]], tools: list[dict[str, Any]] | None,
            generation: bool = True) -> str:
    return str(tok.apply_chat_template(list(messages), tools=tools, add_generation_prompt=generation,
                                       tokenize=False))


def encode(tok: Any, text: str) -> list[int]:
    """The ids of ``text`` as the chat template's own tokenization gives them (special tokens in the
    text are read as special tokens, nothing added around them). A fast tokenizer's Rust backend
    is called directly: the same ids, without the Python wrapper's cost. Where no token can span a
    line break (:func:`_lines_kept`), the text is tokenized line by line and each line's ids are
    kept: a turn's observation repeats most lines of the one before it."""
    backend = getattr(tok, "_tokenizer", None) if getattr(tok, "is_fast", False) else None
    if backend is None:
        return list(tok.encode(text, add_special_tokens=False))
    kept = _lines_kept(tok, backend)
    if kept is None:
        return list(backend.encode(text, add_special_tokens=False).ids)
    if len(kept) > _LINES_KEPT:
        kept.clear()
    out: list[int] = []
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if k + 1 < len(lines):
            line += "\n"
        elif not line:
            break
        ids = kept.get(line)
        if ids is None:
            ids = kept[line] = backend.encode(line, add_special_tokens=False).ids
        out.extend(ids)
    return out


_LINES_ATTR = "_gpu_arena_line_ids"
_LINES_KEPT = 1 << 16


def _lines_kept(tok: Any, backend: Any) -> dict[str, list[int]] | None:
    """The line -> ids store kept on ``tok``, or None where a token may span a line break. A line
    break ends a piece before the model merges anything when the tokenizer has no normalizer,
    its pre-tokenizer (or one in its sequence) splits after every ``\\n``
    (``Split("\\n", merged_with_previous)``, as the presets' tokenizers do) and the others only
    split pieces or map their bytes, its BPE has no dropout and no added token holds a line
    break: ids never cross that seam, so tokenizing line by line gives the ids of the whole
    (tested)."""
    kept = getattr(tok, _LINES_ATTR, None)
    if kept is not None:
        return kept if isinstance(kept, dict) else None  # False: line by line would not be exact
    try:
        spec = json.loads(backend.to_str())
    except (AttributeError, ValueError):
        spec = {}
    pre = spec.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    splits_lines = any(p.get("type") == "Split" and p.get("behavior") == "MergedWithPrevious"
                       and p.get("pattern") in ({"Regex": "\\n"}, {"String": "\n"}) for p in steps)
    # pre-tokenizers that only split pieces or map their bytes (a prefix space added per piece would not)
    only_split = all(p.get("type") in ("Split", "Digits", "Punctuation") or
                     (p.get("type") == "ByteLevel" and not p.get("add_prefix_space")) for p in steps)
    model = spec.get("model") or {}
    exact = (splits_lines and only_split and spec.get("normalizer") is None and model.get("type") == "BPE"
             and model.get("dropout") is None
             and not any("\n" in str(t.get("content", "")) for t in spec.get("added_tokens") or []))
    store: dict[str, list[int]] = {}
    with contextlib.suppress(AttributeError):
        setattr(tok, _LINES_ATTR, store if exact else False)
    return store if exact else None


def full_ids(tok: Any, messages: Sequence[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    """The prompt of ``messages`` as today's loop built it: the whole chat rendered and tokenized."""
    return list(tok.apply_chat_template(list(messages), tools=tools, add_generation_prompt=True, tokenize=True,
                                        return_dict=False))


def turn_piece(tok: Any, before: dict[str, Any], new: Sequence[dict[str, Any]]) -> str:
    """The text the template adds to a chat ending in a message of ``before``'s role when ``new``
    messages follow it (generation prompt included), rendered in a stub context: a one-character
    system turn and a one-character message of that role (what comes before a turn matters to a
    template by its role, not its text; :func:`incremental` checks it). Tools are left out of the
    stub: they only change the system turn. The stub's own render is kept per tokenizer."""
    generation = new[0]["role"] == "assistant"  # the prompt so far ends in the generation prompt
    ctx = [_STUB_SYSTEM, {"role": before["role"], "content": "."}]
    heads: dict[tuple[str, bool], str] = _kept(tok, _STUB_HEADS)
    head = heads.get((before["role"], generation))
    if head is None:
        head = heads[(before["role"], generation)] = _render(tok, ctx, None, generation=generation)
    whole = _render(tok, [*ctx, *new], None)
    if not whole.startswith(head):
        raise ValueError("the chat template does not extend a chat by appending")
    return whole[len(head):]


_STUB_HEADS = "_gpu_arena_chat_stub_heads"


def _kept(tok: Any, name: str) -> dict[Any, Any]:
    """A dict kept on the tokenizer object under ``name`` (a fresh one where it takes no attributes)."""
    kept = getattr(tok, name, None)
    if kept is None:
        kept = {}
        with contextlib.suppress(AttributeError):
            setattr(tok, name, kept)
    return kept


def incremental(tok: Any, tools: list[dict[str, Any]] | None, probe: Sequence[dict[str, Any]] | None = None) -> bool:
    """Whether :class:`ChatTokens` may build ``tok``'s prompts turn by turn: on the ``probe`` chat
    (system, then user/tool turns each answered by an assistant turn), every prefix that ends on a
    user or tool turn, built piece by piece, has exactly the ids of the full render. Checked once
    per tokenizer object, template, tool list and probe system prompt (kept on the tokenizer); the
    probe defaults to :func:`probe_chat`'s. Compact mode's prompts (the system prompt and one turn)
    are built from a first prompt's pieces alone; its probe (``probe_chat(mode="compact")``) checks
    those with the rest."""
    checked: dict[str, bool] = _kept(tok, _ATTR)
    system = probe[0].get("content") if probe is not None else None  # None: the default probe's
    key = json.dumps([str(getattr(tok, "chat_template", "")), tools, system], sort_keys=True)
    if key in checked:
        return checked[key]
    probe = probe if probe is not None else probe_chat()
    ok = True
    try:
        ids = first_ids(tok, probe[:2], tools)
        ok = ids == full_ids(tok, probe[:2], tools)
        for k in range(3, len(probe), 2):
            ids = ids + encode(tok, turn_piece(tok, probe[k - 2], probe[k - 1:k + 1]))
            if not ok or ids != full_ids(tok, probe[:k + 1], tools):
                ok = False
                break
    except Exception:  # a template that cannot render a stub chat: render whole chats
        ok = False
    checked[key] = ok
    return ok


_HEADS = "_gpu_arena_chat_heads"


def first_ids(tok: Any, first: Sequence[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    """The ids of a first prompt (system turn, first user turn) built from the system turn's ids,
    rendered and tokenized once per tokenizer, system text and tool list, and the first turn's
    piece."""
    system, turn = first
    heads: dict[str, list[int]] = _kept(tok, _HEADS)
    key = json.dumps([system, tools], sort_keys=True)
    head = heads.get(key)
    if head is None:
        head = heads[key] = encode(tok, _render(tok, [system], tools, generation=False))
    return head + encode(tok, turn_piece(tok, system, [turn]))


def probe_chat(task: str = "market_round", seed: int = 0, turns: int = 3, mode: str = "tools") -> list[dict[str, Any]]:
    """A chat of real arena turns for :func:`incremental`: ``rule_expert`` playing the first
    ``turns`` rounds of a train world in prompt ``mode`` (tools or compact), each move written as a
    tool call."""
    from ..env import GpuArenaEnv
    from ..llm.prompts import Conversation
    from ..llm.tools import render_reply
    from ..policies import make_policy
    from ..rollout import play_seat

    env = GpuArenaEnv(task=task, split="train")
    obs = env.reset(seed=seed)
    conv = Conversation("compact" if mode == "compact" else "tools")
    conv.observe(obs)
    played = [0]

    def choose(view: Any, current: Any) -> Any:
        if played[0] >= turns:
            return None
        action = policy.act(view)
        content, calls = render_reply(action, "tools", f"call_{played[0]}")
        conv.reply(content, calls)
        played[0] += 1
        return action

    def on_step(action: Any, o: Any) -> None:
        conv.observe(o)

    policy = make_policy("rule_expert", seed=seed)
    play_seat(env, policy, obs, choose=choose, on_step=on_step)
    return conv.transcript


class ChatTokens:
    """One conversation's prompt ids. ``start(messages)`` sets the first prompt (system and first
    turn, rendered whole: its system part with the tool schemas is the same in every episode and is
    cached per tokenizer); ``extend(before, new)`` appends what the ``new`` messages (the reply and
    the next turn) add after ``before`` (the last message already in the prompt). ``ids`` is the
    prompt to generate from. ``mode`` is ``"incremental"`` or ``"full"`` (see the module)."""

    def __init__(self, tok: Any, tools: list[dict[str, Any]] | None, *, mode: str) -> None:
        if mode not in ("incremental", "full"):
            raise ValueError(f"mode must be incremental or full, got {mode!r}")
        self.tok = tok
        self.tools = tools
        self.mode = mode
        self.ids: list[int] = []
        self._messages: list[dict[str, Any]] = []

    def start(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """The first prompt's ids (all of them are new)."""
        self._messages = list(messages)
        if self.mode == "incremental" and len(self._messages) == 2:
            self.ids = first_ids(self.tok, self._messages, self.tools)
        else:
            self.ids = full_ids(self.tok, self._messages, self.tools)
        return list(self.ids)

    def extend(self, new: Sequence[dict[str, Any]]) -> list[int]:
        """Append ``new`` messages; return the ids they added (the whole prompt in ``full`` mode:
        a full render is not guaranteed to extend the last one)."""
        before = self._messages[-1]
        self._messages.extend(new)
        if self.mode == "full":
            self.ids = full_ids(self.tok, self._messages, self.tools)
            return list(self.ids)
        piece = encode(self.tok, turn_piece(self.tok, before, new))
        self.ids.extend(piece)
        return piece

    def extend_verbatim(self, reply: Sequence[int], new: Sequence[dict[str, Any]]) -> list[int]:
        """Append the model's ``reply`` ids as generated (its end token added where it was cut
        before writing one), then the ids of what the template adds after the reply's end: the next
        turn and the generation prompt. Returns the ids added (the reply first)."""
        if self.mode != "incremental":
            raise ValueError("verbatim prompts need a template that extends a chat by appending")
        eos_id, eos = int(self.tok.eos_token_id), str(self.tok.eos_token)
        before = self._messages[-1]
        self._messages.extend(new)
        piece = turn_piece(self.tok, before, new)
        cut = piece.find(eos)
        if cut < 0:
            raise ValueError("the chat template does not end an assistant turn with the end token")
        ids = list(reply) if reply and reply[-1] == eos_id else [*reply, eos_id]
        ids += encode(self.tok, piece[cut + len(eos):])
        self.ids.extend(ids)
        return ids


__all__ = ["ChatTokens", "encode", "first_ids", "full_ids", "incremental", "probe_chat", "turn_piece"]
