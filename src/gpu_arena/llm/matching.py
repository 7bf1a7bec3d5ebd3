"""Decoding under an action grammar with `llguidance`: the tokenizer it needs, compiled matchers
kept by grammar text, and the ``transformers`` logits processor that masks a batch's rows.

The grammars themselves (what a seat may write on a turn) are :mod:`gpu_arena.llm.constrain`'s;
this module turns them into token masks. Compiling a grammar costs about 0.5 ms however small it
is, and 2 ms for a market turn's (decision 0032), so matchers are compiled once per text and
copied for each use.
"""

from __future__ import annotations

import contextlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .constrain import ActionGrammar, fits_ids, generic_grammar
from .parsing import one_tool_call
from .prompts import reply_format

_TOKENIZER_ATTR = "_gpu_arena_grammar_tokenizer"
_LONGEST_TOKEN = 1000  # llguidance's token trie takes tokens of up to 1,024 bytes


def _token_bytes(tokenizer: Any) -> list[bytes] | None:
    """Each token's bytes for a byte-level BPE (None for other tokenizers). Special tokens, and
    tokens too long for llguidance's trie, become named special tokens: never in any action."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    inverse = {c: b for b, c in bytes_to_unicode().items()}
    special = set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)
    out: list[bytes] = []
    for i in range(len(tokenizer)):
        piece = tokenizer.convert_ids_to_tokens(i)
        if i in special:
            out.append(b"\xff" + str(piece).encode())
            continue
        if piece is None or any(c not in inverse for c in piece):
            return None
        raw = bytes(inverse[c] for c in piece)
        out.append(raw if len(raw) <= _LONGEST_TOKEN else b"\xff[long_%d]" % i)
    return out


class _Vocabulary:
    """A tokenizer as llguidance's ``TokenizerWrapper`` expects it."""

    def __init__(self, tokenizer: Any, tokens: list[bytes]) -> None:
        self._tokenizer = tokenizer
        self.tokens = tokens
        self.eos_token_id = tokenizer.eos_token_id
        self.bos_token_id = tokenizer.bos_token_id
        self.special_token_ids = sorted(set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder))

    def __call__(self, text: str | bytes) -> list[int]:
        s = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        return list(self._tokenizer.encode(s, add_special_tokens=False))


def grammar_tokenizer(tokenizer: Any) -> Any:
    """One ``llguidance.LLTokenizer`` per tokenizer object, kept on the tokenizer itself. A fast
    tokenizer goes through llguidance's own converter; the byte-level BPEs this project trains may
    hold pieces longer than its trie takes (whole tool lists of the prompt), so theirs are listed
    byte by byte with those pieces out of reach."""
    import llguidance
    import llguidance.hf

    cached = getattr(tokenizer, _TOKENIZER_ATTR, None)
    if cached is not None:
        return cached
    tokens = _token_bytes(tokenizer)
    if tokens is not None:
        built = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Vocabulary(tokenizer, tokens)))
    else:
        built = llguidance.hf.from_tokenizer(tokenizer)
    setattr(tokenizer, _TOKENIZER_ATTR, built)
    return built


_MATCHERS_ATTR = "_gpu_arena_matchers"
_MATCHERS_KEPT = 2048


def _kept_matchers(tokenizer: Any) -> OrderedDict[str, Any]:
    """The compiled matchers kept on ``tokenizer`` by grammar text (a fresh dict where it takes no
    attributes)."""
    kept: OrderedDict[str, Any] | None = getattr(tokenizer, _MATCHERS_ATTR, None)
    if kept is None:
        kept = OrderedDict()
        with contextlib.suppress(AttributeError):
            setattr(tokenizer, _MATCHERS_ATTR, kept)
    return kept


def _keep(kept: OrderedDict[str, Any], lark: str, matcher: Any) -> None:
    """Keep ``matcher`` as the newest, forgetting the oldest beyond :data:`_MATCHERS_KEPT`."""
    kept[lark] = matcher
    while len(kept) > _MATCHERS_KEPT:
        kept.popitem(last=False)


def compiled_matcher(tokenizer: Any, lark: str, *, cache: bool = True) -> Any:
    """A fresh ``LLMatcher`` for ``lark``: compiled once per tokenizer and grammar text (about 2 ms
    each), then copied for each use (about 10 us; a copy starts where the compiled one stands, at
    the start of a reply). Worlds of a task name their blocks, jobs and labs alike, so most turns
    ask for a grammar already compiled."""
    import llguidance

    if not cache:  # compiled for this use alone (the loop before decision 0027 did this every turn)
        return llguidance.LLMatcher(grammar_tokenizer(tokenizer), lark, log_level=0)
    kept = _kept_matchers(tokenizer)
    hit = kept.get(lark)
    if hit is None:
        hit = llguidance.LLMatcher(grammar_tokenizer(tokenizer), lark, log_level=0)
        if hit.is_error():
            return hit  # not kept: the caller reports it
        _keep(kept, lark, hit)
    else:
        kept.move_to_end(lark)
    return hit.deep_copy()


_COMPILERS: list[Any] = []  # one thread pool per process, made on first use


def precompile(tokenizer: Any, larks: Sequence[str]) -> None:
    """Compile the grammars of ``larks`` not yet kept for ``tokenizer``, on a thread pool (llguidance
    compiles without the GIL: a batch's new grammars take a fraction of their serial time on a
    machine with cores to spare), so :func:`compiled_matcher` then finds them kept."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import llguidance

    kept = _kept_matchers(tokenizer)
    missing = list(dict.fromkeys(g for g in larks if g not in kept))
    if len(missing) < 2:
        return  # nothing to spread
    if not _COMPILERS:
        _COMPILERS.append(ThreadPoolExecutor(max_workers=max(1, min(8, (os.cpu_count() or 2) - 1)),
                                             thread_name_prefix="grammar"))
    lltok = grammar_tokenizer(tokenizer)
    built = list(_COMPILERS[0].map(lambda g: llguidance.LLMatcher(lltok, g, log_level=0), missing))
    for g, m in zip(missing, built, strict=True):
        if not m.is_error():
            _keep(kept, g, m)


class GrammarConstraint:
    """A ``transformers`` logits processor for a batch of replies: row ``r`` may only write a
    sentence of ``grammars[r]`` (None: the row is free). ``prompt_width`` is where the generated
    tokens start in ``input_ids`` (left-padded batches share it). Give ``generate`` at least
    :meth:`max_new_tokens` new tokens and every constrained row ends with a complete action.

    Rows advance their llguidance matcher by the tokens generated since the last call; the masks of
    a step are computed together (``LLExecutor``, on llguidance's threads). ``errors`` counts rows
    whose matcher failed (a token outside the mask: never, unless ``generate`` was given other
    processors that change the choice after this one)."""

    def __init__(self, tokenizer: Any, grammars: Sequence[ActionGrammar | None], prompt_width: int, *,
                 cache_matchers: bool = True) -> None:
        import llguidance

        self.tokenizer = tokenizer
        self.grammars = list(grammars)
        self.prompt_width = prompt_width
        lltok = grammar_tokenizer(tokenizer)
        self.vocab = int(lltok.vocab_size)
        if cache_matchers:
            precompile(tokenizer, [g.lark for g in self.grammars if g is not None])
        self.matchers = [None if g is None else compiled_matcher(tokenizer, g.lark, cache=cache_matchers)
                         for g in self.grammars]
        for g, m in zip(self.grammars, self.matchers, strict=True):
            if m is not None and m.is_error():
                raise ValueError(f"invalid action grammar: {m.get_error()}\n{g.lark if g else ''}")
        self.executor = llguidance.LLExecutor()
        self.fed = [0] * len(self.matchers)
        self.errors = 0

    def max_new_tokens(self, at_least: int = 0) -> int:
        """A token budget that lets every constrained row finish (one byte per token at worst, then
        the end token)."""
        return max([at_least] + [g.max_bytes + 1 for g in self.grammars if g is not None])

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np
        import torch
        from llguidance.torch import allocate_token_bitmask, fill_next_token_bitmask_par

        generated = int(input_ids.shape[1]) - self.prompt_width
        live: list[tuple[Any, int]] = []
        ending: list[int] = []  # rows whose sentence is complete: the end token is all they may write
        for row, m in enumerate(self.matchers):
            if m is None or m.is_error():
                continue
            if self.fed[row] < generated:
                new = input_ids[row, self.prompt_width + self.fed[row]:].tolist()
                self.fed[row] = generated
                if not m.is_stopped() and not m.consume_tokens(new):
                    self.errors += 1
                    continue
            if m.is_stopped():
                # llguidance stops a matcher once its sentence is complete; left free, a row went on
                # writing after its action until another row's budget ran out (decision 0027)
                ending.append(row)
            else:
                live.append((m, row))
        if ending:
            eos = int(self.tokenizer.eos_token_id)
            scores[ending] = float("-inf")
            scores[ending, eos] = 0.0
        if not live:
            return scores
        bitmask = allocate_token_bitmask(int(scores.shape[0]), self.vocab)
        fill_next_token_bitmask_par(self.executor, live, bitmask)
        bits = np.unpackbits(bitmask.numpy().view(np.uint8), axis=1, bitorder="little")
        width = int(scores.shape[-1])
        allowed = np.zeros((bits.shape[0], width), dtype=bool)
        n = min(width, self.vocab)
        allowed[:, :n] = bits[:, :n].astype(bool)
        rows = [row for _, row in live]
        blocked = ~torch.from_numpy(allowed[rows]).to(scores.device)
        scores[rows] = scores[rows].masked_fill(blocked, float("-inf"))
        return scores


def reply_fits(tokenizer: Any, reply: Sequence[int], lists: Any, mode: str = "tools") -> bool:
    """Whether generated ids ``reply`` are a sentence of the turn's grammar (the seat's
    :func:`~gpu_arena.llm.constrain.legal_lists` ``lists``, in prompt ``mode``) followed by the end
    token, without compiling that grammar: the ids must be a sentence of the compiled-once
    :func:`~gpu_arena.llm.constrain.generic_grammar` and its ids must fit ``lists``
    (:func:`~gpu_arena.llm.constrain.fits_ids`).

    A greedy reply that fits is the reply greedy decoding under the grammar writes: every token it
    chose was allowed (each prefix of a sentence is), and masking leaves the allowed tokens' scores
    as they were. The rollout engine decodes greedy turns freely, keeps the replies that fit and
    decodes the others again under their grammar (:class:`~gpu_arena.rollouts.RolloutEngine`,
    ``check_first``), so most greedy turns compile no grammar."""
    if not reply or reply[-1] != tokenizer.eos_token_id:
        return False
    body = list(reply[:-1])
    m = compiled_matcher(tokenizer, generic_grammar(mode).lark)
    if m.is_error() or m.try_consume_tokens(body) != len(body) or not m.is_accepting():
        return False
    text = tokenizer.decode(body, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    if reply_format(mode) != "json":
        call = one_tool_call(text)
        return call is not None and fits_ids(call[0], call[1], lists)
    try:
        obj = json.loads(text)
        action, arguments = obj.pop("action_type"), obj
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    return isinstance(arguments, dict) and fits_ids(str(action), arguments, lists)


__all__ = ["GrammarConstraint", "compiled_matcher", "grammar_tokenizer", "precompile", "reply_fits"]
