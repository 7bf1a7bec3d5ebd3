"""Generation backends: what writes the model's replies, behind one interface.

A backend answers a batch of prompts (token ids) with the new ids of each reply (its end token
kept, as one unpadded ``generate`` returns it) or, for a server that answers in text, the text.
``grammars[i]``, when given, is prompt ``i``'s action grammar ``(lark, max_bytes)``: the backend
decodes under it where it can (``constrained`` says whether it did; a run records it).

- :class:`TransformersBackend` (default, CPU and GPU): ``model.generate`` on left-padded
  length-sorted groups, the grammar as a logits processor (:mod:`gpu_arena.llm.constrain`).
- :class:`VLLMBackend`: vLLM in this process, when installed (the GPU recipe); grammars go to
  vLLM's structured outputs as Lark.
- :class:`OpenAIBackend`: any OpenAI-compatible completions server (``vllm serve``,
  ``transformers serve``, llama.cpp's server) for a separate inference fleet; the prompt is sent
  as token ids, the grammar as vLLM's ``structured_outputs`` where ``grammar_field`` says the
  server takes one, else decoding is free and the parser reads what comes back.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Grammar = tuple[str, int]  # (lark, max_bytes)


@dataclass
class GenerationStats:
    """What a backend did: calls, prompt tokens prefilled (not those a kept KV cache held),
    generated tokens, seconds inside generation."""

    calls: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    seconds: float = 0.0


class Backend(Protocol):
    """Writes replies to prompts; see the module."""

    name: str
    stats: GenerationStats

    @property
    def constrained(self) -> bool:
        """Whether grammars given to :meth:`generate` constrain its decoding."""

    def generate(self, prompts: Sequence[list[int]], *, temperature: float, top_p: float, max_new_tokens: int,
                 seed: int, grammars: Sequence[Grammar | None] | None = None) -> list[list[int] | str]:
        """One reply per prompt, in order."""


# attention-mask entries (rows x new ids x width) one prefill forward may hold: 2^27 float32 entries is
# 512 MiB. Measured on a lookahead over 48 coalition_market worlds from run 22's SFT model (96 rows,
# width 4,045, one forward): the model process's peak reached 7.8 GB, 5.2 GB of it that forward
PREFILL_BUDGET = 1 << 27


def prefill_chunk(rows: int, width: int, budget: int = PREFILL_BUDGET) -> int:
    """How many ids of each row one prefill forward takes, so that ``rows x ids x width`` stays
    within ``budget`` (at least one id, whatever the batch)."""
    return max(1, budget // max(1, rows * width))


# what one more prefill forward costs, in ids computed for one row: the groups of
# :func:`prefill_groups` trade a forward against this many padded ids. A lookahead over six
# coalition_market worlds took 88.5, 88.1 and 86.5 s at 32, 256 and 1,024 (decision 0050): flat
PREFILL_GROUP_COST = 256


def prefill_groups(rest: Sequence[int], cost: int = PREFILL_GROUP_COST) -> list[list[int]]:
    """The rows of a batch (by the length of each one's prompt past its cached prefix, ``rest``)
    in groups prefilled one forward pass each: a group computes its longest rest for every row,
    so a row that parts from its cache late would otherwise pay for the batch's earliest. Groups
    are runs of the rows sorted by rest, chosen to minimise the ids computed plus ``cost`` a
    group (exactly, by dynamic programming: a batch has at most a few hundred rows). A row whose
    rest is one id has nothing to prefill (``generate`` feeds that id) and costs nothing."""
    order = sorted(range(len(rest)), key=lambda r: -rest[r])
    n = len(order)
    best = [0] * (n + 1)  # best[i]: the cost of grouping order[i:]
    cut = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        longest = rest[order[i]]
        if longest <= 1:  # this row and every one after it: nothing to prefill, one group
            continue
        best[i], cut[i] = min(((j - i) * (longest - 1) + cost + best[j], j)
                              for j in range(i + 1, n + 1))
    groups, i = [], 0
    while i < n:
        groups.append(order[i:cut[i]])
        i = cut[i]
    return groups


def _widened(t: Any, rows: Any, pads: int) -> Any:
    """Rows ``rows`` of a ``[batch, heads, length, dim]`` cache tensor, ``pads`` zero columns after them."""
    import torch

    t = t[rows]
    return torch.cat([t, t.new_zeros((*t.shape[:2], pads, t.shape[3]))], dim=2)


class TransformersBackend:
    """``model.generate`` (see the module). ``group_size`` prompts per call, sorted by length: on
    the CPU a small model's decoding steps cost more than the padded prefill, so the default takes
    a round's prompts in one call. The model is used in eval mode under ``inference_mode`` and
    left as it was found.

    ``prefix_cache_bytes`` (default 1 GiB; 0 turns it off): the KV caches of the sequences it
    computed are kept (:class:`~gpu_arena.rollouts.kvcache.PrefixStore`), so a prompt that
    extends one (an episode's next turn, a fork of its turns, a task's shared system prompt) is
    prefilled from where they part. They hold for the weights that computed them:
    :meth:`clear_cache` when those change (the rollout engine does at the start of every run).

    ``prefill_budget``: the attention-mask entries (rows x new ids x width) one prefill forward
    may hold; a longer prefill runs in column chunks, so the memory a call takes is bounded by the
    batch's KV cache, not by the square of its prompts' length (:func:`prefill_chunk`)."""

    name = "transformers"
    constrained = True
    returns_ids = True  # replies are token ids: the engine can check a greedy one against its grammar

    def __init__(self, model: Any, tokenizer: Any, *, group_size: int = 256, prefix_cache_bytes: int = 1 << 30,
                 prefill_budget: int = PREFILL_BUDGET) -> None:
        from .kvcache import PrefixStore

        self.model = model
        self.prefill_budget = prefill_budget
        self.tokenizer = tokenizer
        self.group_size = group_size
        self.stats = GenerationStats()
        self.prefixes: PrefixStore | None = PrefixStore(prefix_cache_bytes) if prefix_cache_bytes > 0 else None

    def clear_cache(self) -> None:
        """Forget the kept KV caches (the model's weights changed)."""
        if self.prefixes is not None:
            self.prefixes.clear()

    def generate(self, prompts: Sequence[list[int]], *, temperature: float, top_p: float, max_new_tokens: int,
                 seed: int, grammars: Sequence[Grammar | None] | None = None) -> list[list[int] | str]:
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        out: dict[int, list[int] | str] = {}
        for g, lo in enumerate(range(0, len(order), self.group_size)):
            rows = order[lo:lo + self.group_size]
            group = [prompts[i] for i in rows]
            ids, mask, cache, layout = self._prepare(group)
            replies, raw = self._group(ids, mask, temperature, top_p, max_new_tokens, seed * 1009 + g,
                                       [grammars[i] for i in rows] if grammars else None, cache)
            self._remember(group, layout, cache, raw)
            out.update(zip(rows, replies, strict=True))
        return [out[i] for i in range(len(prompts))]

    def generate_with_samples(self, prompts: Sequence[list[int]], *, samples: int, temperature: float, top_p: float,
                              max_new_tokens: int, seed: int, grammars: Sequence[Grammar | None] | None = None
                              ) -> tuple[list[list[int] | str], list[list[int] | str]]:
        """Each prompt's greedy reply and ``samples`` sampled ones (``[p0 s0, p0 s1, ..., p1 s0, ...]``),
        the prompt prefilled once for all of them: the KV cache of the prompt is computed once, copied
        for the greedy decoding and repeated for the sampled ones (a lookahead turn asks for both; the
        prefill of a whole conversation is most of a ``generate`` call)."""
        import copy

        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        greedy: dict[int, list[int] | str] = {}
        sampled: dict[int, list[list[int] | str]] = {}
        for g, lo in enumerate(range(0, len(order), self.group_size)):
            rows = order[lo:lo + self.group_size]
            group = [prompts[i] for i in rows]
            gr = [grammars[i] for i in rows] if grammars else None
            ids, mask, cache, layout = self._prepare(group)
            first = copy.deepcopy(cache)
            replies, raw = self._group(ids, mask, 0.0, top_p, max_new_tokens, seed * 1009 + g, gr, first)
            self._remember(group, layout, first, raw)
            greedy.update(zip(rows, replies, strict=True))
            if samples:
                cache.batch_repeat_interleave(samples)
                drawn, raw = self._group(ids.repeat_interleave(samples, 0), mask.repeat_interleave(samples, 0),
                                         temperature, top_p, max_new_tokens, seed * 1009 + g + 7,
                                         [x for x in gr for _ in range(samples)] if gr else None, cache)
                if layout is not None:
                    self._remember([p for p in group for _ in range(samples)], layout.repeated(samples), cache, raw)
                for k, i in enumerate(rows):
                    sampled[i] = drawn[k * samples:(k + 1) * samples]
        return ([greedy[i] for i in range(len(prompts))],
                [r for i in range(len(prompts)) for r in sampled.get(i, [])])

    def _batch(self, prompts: list[list[int]]) -> tuple[Any, Any]:
        """Left-padded ids and attention mask on the model's device, as generation needs."""
        import torch

        tok = self.tokenizer
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), int(tok.pad_token_id), dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, p in enumerate(prompts):
            ids[row, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[row, width - len(p):] = 1
        return ids.to(self.model.device), mask.to(self.model.device)

    def _prepare(self, prompts: list[list[int]]) -> tuple[Any, Any, Any, Any]:
        """Ids, mask, a KV cache of every prompt but its last id (``generate`` feeds that one) and
        the rows' :class:`~gpu_arena.rollouts.kvcache.Layout`: from the prefix store where it holds
        a prompt's beginning, the rest prefilled here. Without a store: left-padded ids, the whole
        cache prefilled here (in bounded chunks, not in one piece by ``generate``), no layout."""
        if self.prefixes is None or min(len(p) for p in prompts) < 2:
            ids, mask = self._batch(prompts)
            return ids, mask, self._prefill(ids, mask), None
        import torch

        from .kvcache import assemble

        hits = [self.prefixes.lookup(p) for p in prompts]
        with torch.inference_mode():
            ids, mask, cache, layout = assemble(prompts, hits, int(self.tokenizer.pad_token_id), self.model.device)
        if layout.W - 1 > layout.C:
            cache = self._prefill_groups(ids, mask, cache, layout)
        return ids, mask, cache, layout

    def _prefill_groups(self, ids: Any, mask: Any, cache: Any, layout: Any) -> Any:
        """The batch's cache prefilled from its prefixes, in the groups of :func:`prefill_groups`:
        each group's rows from the column where their longest rest starts, the columns between
        their prefixes and that one left as zeros (pads: the mask hides them). The same cache as
        one prefill from column ``layout.C``, rows in the batch's order. Without a cached prefix
        (a run's first call) or with layers the store cannot join, one prefill as before."""
        import torch
        from transformers import DynamicCache

        from .kvcache import plain_layers

        groups = prefill_groups(layout.rest)
        if cache is None or len(groups) == 1 or not plain_layers(cache):
            return self._prefill(ids, mask, cache, start=layout.C)
        parts: list[Any] = []  # one cache a group, each of the width W - 1
        with torch.inference_mode():
            for rows in groups:
                index = torch.tensor(rows, device=ids.device)
                start = layout.W - max(layout.rest[r] for r in rows)
                pads = start - layout.C
                part = DynamicCache(ddp_cache_data=[(_widened(layer.keys, index, pads), _widened(layer.values, index, pads))
                                                    for layer in cache.layers])
                if start < layout.W - 1:
                    part = self._prefill(ids[index], mask[index], part, start=start)
                else:  # only the last id, which generate feeds: counted as a one-piece prefill counts it
                    self.stats.prompt_tokens += int(mask[index, start:].sum())
                parts.append(part)
            back = torch.tensor([r for rows in groups for r in rows]).argsort().to(ids.device)
            return DynamicCache(ddp_cache_data=[
                (torch.cat([p.layers[n].keys for p in parts])[back], torch.cat([p.layers[n].values for p in parts])[back])
                for n in range(len(cache.layers))])

    def _remember(self, prompts: list[list[int]], layout: Any, cache: Any, raw: Any) -> None:
        """Keep each row's KV cache (prompt and reply, as far as ``generate`` fed it) in the store."""
        from .kvcache import plain_layers, rows_kv

        if self.prefixes is None or layout is None or cache is None:
            return
        if not plain_layers(cache):  # sliding-window or hybrid attention: the store cannot join those
            self.prefixes = None
            return
        import torch

        fed = cache.get_seq_length() - layout.W  # reply ids whose keys and values are in the cache
        eos = self.tokenizer.eos_token_id
        with torch.inference_mode():
            for r, p in enumerate(prompts):
                new = raw[r].tolist()
                real = new.index(eos) + 1 if eos in new else len(new)
                k = max(0, min(real, fed))
                self.prefixes.add(p + new[:k], rows_kv(cache, layout, r, k))

    def _prefill(self, ids: Any, mask: Any, cache: Any = None, start: int = 0) -> Any:
        """The KV cache of every prompt but its last token (``generate`` feeds that one), at the
        positions ``generate`` gives left-padded rows; ``cache`` already holds columns ``:start``.

        In column chunks of at most :func:`prefill_chunk` ids: a forward's attention mask (and its
        scores) is rows x new ids x width, which for a lookahead's 96 forks of 4,000-id
        ``coalition_market`` prompts is gigabytes in one piece (decision 0040)."""
        import torch

        t0 = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        rows, width = int(ids.shape[0]), int(ids.shape[1])
        step = prefill_chunk(rows, width, self.prefill_budget)
        try:
            with torch.inference_mode():
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                for lo in range(start, width - 1, step):
                    hi = min(width - 1, lo + step)
                    out = self.model(input_ids=ids[:, lo:hi], attention_mask=mask[:, :hi],
                                     position_ids=positions[:, lo:hi], use_cache=True, **{self._cache_name: cache},
                                     **self._no_logits)
                    cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
                    del out  # its logits: the next chunk's peak should not hold them
        finally:
            if was_training:
                self.model.train()
        self.stats.seconds += time.perf_counter() - t0
        self.stats.prompt_tokens += int(mask[:, start:].sum())
        return cache

    @functools.cached_property
    def _forward_params(self) -> frozenset[str]:
        """The names the model's forward takes (read once: the arguments below depend on them)."""
        import inspect

        return frozenset(inspect.signature(self.model.forward).parameters)

    @property
    def _no_logits(self) -> dict[str, int]:
        """What asks the model's forward for the last position's logits alone: a prefill wants the KV
        cache, and every position's logits are batch x length x vocabulary floats (200 coalition_market
        prompts: some 10 GB, which ended an evaluation in the out-of-memory killer)."""
        return {"logits_to_keep": 1} if "logits_to_keep" in self._forward_params else {}

    @property
    def _cache_name(self) -> str:
        """What the model's forward calls its KV cache: ``cache`` from transformers 5.2x (which
        warns on the old name), ``past_key_values`` before."""
        return "cache" if "cache" in self._forward_params else "past_key_values"

    def _group(self, ids: Any, mask: Any, temperature: float, top_p: float, max_new_tokens: int, seed: int,
               grammars: list[Grammar | None] | None, cache: Any = None) -> tuple[list[list[int] | str], Any]:
        """The replies to one left-padded group, and the raw new ids (one row each, padded)."""
        import torch

        tok, model = self.tokenizer, self.model
        width = int(ids.shape[1])
        sample = temperature > 0
        # use_cache: a checkpoint saved by a trainer says use_cache=False (training does not keep a KV
        # cache); generating without one recomputes the whole sequence for every new token
        kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": sample, "use_cache": True,
                                  "pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id}
        if cache is not None:
            kwargs[self._cache_name] = cache
        if sample:
            kwargs.update(temperature=temperature, top_p=top_p, top_k=0)
        if grammars is not None and any(g is not None for g in grammars):
            from transformers import LogitsProcessorList

            from ..llm.constrain import ActionGrammar
            from ..llm.matching import GrammarConstraint

            constraint = GrammarConstraint(tok, [None if g is None else ActionGrammar(g[0], (), g[1]) for g in grammars],
                                           width)
            # room for the longest reply the grammar allows: every constrained answer is complete
            kwargs["max_new_tokens"] = constraint.max_new_tokens(max_new_tokens)
            kwargs["logits_processor"] = LogitsProcessorList([constraint])
        was_training = model.training
        model.eval()
        t0 = time.perf_counter()
        try:
            with torch.inference_mode():
                if sample:
                    torch.manual_seed(seed)
                with warnings.catch_warnings():  # transformers 5.2x renames past_key_values; 5.1x knows only it
                    warnings.simplefilter("ignore", FutureWarning)
                    out = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        finally:
            if was_training:
                model.train()
        self.stats.seconds += time.perf_counter() - t0
        self.stats.calls += 1
        if cache is None:  # generate prefilled the prompts itself
            self.stats.prompt_tokens += int(mask.sum())
        replies: list[list[int] | str] = []
        new_all = out[:, width:].cpu()
        eos, pad = tok.eos_token_id, tok.pad_token_id
        for row in range(new_all.shape[0]):
            new = new_all[row].tolist()
            if eos in new:
                new = new[: new.index(eos) + 1]  # keep the end token, as one unpadded generate returns it
            new = [t for t in new if t != pad]
            self.stats.generated_tokens += len(new)
            replies.append(new)
        return replies, new_all


class VLLMBackend:
    """vLLM in this process (``pip install vllm`` on a GPU machine). ``llm`` is a ``vllm.LLM`` (or
    pass ``model=`` a path, and engine arguments). Grammars go to structured outputs as Lark."""

    name = "vllm"
    constrained = True

    def __init__(self, llm: Any = None, *, model: str | None = None, **engine_args: Any) -> None:
        try:
            import vllm
        except ImportError as e:  # pragma: no cover - the GPU recipe installs it
            raise RuntimeError("the vllm backend needs vLLM installed (pip install vllm)") from e
        self._vllm = vllm
        self.llm = llm if llm is not None else vllm.LLM(model=model, **engine_args)
        self.stats = GenerationStats()

    def _params(self, temperature: float, top_p: float, max_new_tokens: int, seed: int, grammar: Grammar | None) -> Any:
        sampling = self._vllm.SamplingParams
        kwargs: dict[str, Any] = {"temperature": temperature, "top_p": top_p if temperature > 0 else 1.0,
                                  "max_tokens": max(max_new_tokens, grammar[1] + 1 if grammar else 0), "seed": seed,
                                  "skip_special_tokens": False}
        if grammar is not None:
            try:  # vLLM >= 0.10: structured_outputs; before: guided_decoding
                from vllm.sampling_params import StructuredOutputsParams
                kwargs["structured_outputs"] = StructuredOutputsParams(grammar=grammar[0])
            except ImportError:  # pragma: no cover - older vLLM
                from vllm.sampling_params import GuidedDecodingParams
                kwargs["guided_decoding"] = GuidedDecodingParams(grammar=grammar[0])
        return sampling(**kwargs)

    def generate(self, prompts: Sequence[list[int]], *, temperature: float, top_p: float, max_new_tokens: int,
                 seed: int, grammars: Sequence[Grammar | None] | None = None) -> list[list[int] | str]:
        params = [self._params(temperature, top_p, max_new_tokens, seed + i, grammars[i] if grammars else None)
                  for i in range(len(prompts))]
        t0 = time.perf_counter()
        outs = self.llm.generate([{"prompt_token_ids": list(p)} for p in prompts], params, use_tqdm=False)
        self.stats.seconds += time.perf_counter() - t0
        self.stats.calls += 1
        self.stats.prompt_tokens += sum(len(p) for p in prompts)
        replies: list[list[int] | str] = []
        for o in outs:
            ids = list(o.outputs[0].token_ids)
            self.stats.generated_tokens += len(ids)
            replies.append(ids)
        return replies


class OpenAIBackend:
    """An OpenAI-compatible ``/v1/completions`` server at ``base_url`` serving ``model``. Prompts go
    as token ids (vLLM, ``transformers serve`` and llama.cpp's server take them); replies come back
    as text. ``grammar_field``: ``"structured_outputs"`` (vLLM: grammars constrain decoding) or
    ``None`` (free decoding, the parser reads the text: the run's record says so)."""

    name = "openai"

    def __init__(self, base_url: str, model: str, *, api_key: str = "EMPTY", grammar_field: str | None = None,
                 timeout_s: float = 120.0, concurrency: int = 16) -> None:
        import httpx

        if grammar_field not in (None, "structured_outputs"):
            raise ValueError("grammar_field must be None or 'structured_outputs'")
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.grammar_field = grammar_field
        self.concurrency = concurrency
        self._client = httpx.Client(timeout=timeout_s, headers={"Authorization": f"Bearer {api_key}"})
        self.stats = GenerationStats()

    @property
    def constrained(self) -> bool:
        return self.grammar_field is not None

    def _one(self, prompt: list[int], temperature: float, top_p: float, max_new_tokens: int, seed: int,
             grammar: Grammar | None) -> str:
        body: dict[str, Any] = {"model": self.model, "prompt": list(prompt), "temperature": temperature,
                                "top_p": top_p, "max_tokens": max_new_tokens, "seed": seed}
        if grammar is not None and self.grammar_field:
            body[self.grammar_field] = {"grammar": grammar[0]}
            body["max_tokens"] = max(max_new_tokens, grammar[1] + 1)
        r = self._client.post(self.url, json=body)
        r.raise_for_status()
        data = r.json()
        usage = data.get("usage") or {}
        self.stats.generated_tokens += int(usage.get("completion_tokens") or 0)
        return str(data["choices"][0].get("text") or "")

    def generate(self, prompts: Sequence[list[int]], *, temperature: float, top_p: float, max_new_tokens: int,
                 seed: int, grammars: Sequence[Grammar | None] | None = None) -> list[list[int] | str]:
        from concurrent.futures import ThreadPoolExecutor

        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(prompts)))) as pool:
            futures = [pool.submit(self._one, p, temperature, top_p, max_new_tokens, seed + i,
                                   grammars[i] if grammars else None) for i, p in enumerate(prompts)]
            replies: list[list[int] | str] = [f.result() for f in futures]
        self.stats.seconds += time.perf_counter() - t0
        self.stats.calls += 1
        self.stats.prompt_tokens += sum(len(p) for p in prompts)
        return replies

    def close(self) -> None:
        self._client.close()


__all__ = ["Backend", "GenerationStats", "Grammar", "OpenAIBackend", "TransformersBackend", "VLLMBackend"]
