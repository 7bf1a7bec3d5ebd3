"""Prefix reuse for the transformers backend: each episode's KV cache carried from turn to turn.

An episode's prompt grows by appending (:mod:`gpu_arena.rollouts.chat`): turn ``k+1``'s prompt is
turn ``k``'s, the reply, and the environment's next message. Prefilling the whole conversation
every turn was most of a ``generate`` call on the CPU (decision 0027). :class:`PrefixStore` keeps
the key/value tensors of the sequences the backend has computed (prompt and reply), looked up by
the longest shared prefix, so a turn prefills only what is new: the reply's re-rendered tail and
the next message. Episodes of one task also share their system prompt, and a lookahead's forks
their parent's turns, and both hit the store the same way.

Lookup is by blocks of :data:`BLOCK` ids (each block's hash chained on the one before, as vLLM's
prefix caching does), then extended id by id within the last block; a hit is verified against the
stored ids. The store is bounded in bytes and forgets the least recently used sequence first. It
is only correct for the weights that computed it: :meth:`PrefixStore.clear` when they change (the
rollout engine clears it at the start of every run; RFT fine-tunes between runs).

:func:`assemble` lays a batch out for ``generate`` with a cache: row ``r`` is
``[pad][its cached prefix][pad][the rest of its prompt]``, the prefixes right-aligned at a common
column ``C`` and the rests at the end; the attention mask zeroes the pads and ``generate`` derives
positions from it, so every row sees its own positions ``0..len-1`` as it would unpadded.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

BLOCK = 16


@dataclass
class Entry:
    """One stored sequence: its ids and, per layer, its keys and values ``[kv_heads, len, dim]``."""

    ids: list[int]
    kv: list[tuple[Any, Any]]
    hashes: list[int]
    key: int

    @property
    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.kv)


def block_hashes(ids: list[int], limit: int | None = None) -> list[int]:
    """The chained hashes of the whole blocks of ``ids`` (of its first ``limit`` ids)."""
    n = len(ids) if limit is None else min(len(ids), limit)
    out: list[int] = []
    h = 0
    for lo in range(0, n - BLOCK + 1, BLOCK):
        h = hash((h, tuple(ids[lo:lo + BLOCK])))
        out.append(h)
    return out


class PrefixStore:
    """Key/value tensors of computed sequences, by longest shared prefix (see the module).

    ``budget_bytes`` bounds what it holds (least recently used first out). ``hits``/``lookups``
    and ``reused_tokens`` say how much it saved."""

    def __init__(self, budget_bytes: int = 1 << 30) -> None:
        self.budget_bytes = budget_bytes
        self.entries: OrderedDict[int, Entry] = OrderedDict()
        self.index: dict[int, int] = {}  # block hash -> id of the latest entry holding that prefix
        self.bytes = 0
        self._next = 0
        self.lookups = self.hits = self.reused_tokens = 0

    def clear(self) -> None:
        """Forget everything (the weights changed)."""
        self.entries.clear()
        self.index.clear()
        self.bytes = 0

    def lookup(self, ids: list[int]) -> tuple[Entry | None, int]:
        """The stored entry sharing the longest prefix with ``ids`` and that prefix's length, at
        most ``len(ids) - 1`` (a prompt's last id is always fed, for its logits)."""
        self.lookups += 1
        cap = len(ids) - 1
        best: Entry | None = None
        n = 0
        for k, h in enumerate(block_hashes(ids, cap)):
            key = self.index.get(h)
            entry = self.entries.get(key) if key is not None else None
            if entry is None:
                break
            best, n = entry, (k + 1) * BLOCK
        if best is None or best.ids[:n] != ids[:n]:
            return None, 0
        limit = min(len(best.ids), cap)
        while n < limit and best.ids[n] == ids[n]:
            n += 1
        self.entries.move_to_end(best.key)
        self.hits += 1
        self.reused_tokens += n
        return best, n

    def add(self, ids: list[int], kv: list[tuple[Any, Any]]) -> None:
        """Store ``ids`` with its keys and values (one ``[kv_heads, len, dim]`` pair per layer)."""
        if len(ids) < BLOCK:
            return
        key = self._next
        self._next += 1
        entry = Entry(list(ids), kv, block_hashes(ids), key)
        size = entry.nbytes
        if size > self.budget_bytes:
            return
        self.entries[key] = entry
        self.bytes += size
        for h in entry.hashes:
            self.index[h] = key
        while self.bytes > self.budget_bytes and self.entries:
            old_key, old = self.entries.popitem(last=False)
            self.bytes -= old.nbytes
            for h in old.hashes:
                if self.index.get(h) == old_key:
                    del self.index[h]


@dataclass
class Layout:
    """How :func:`assemble` placed each row: its cached prefix length ``cached[r]``, the rest's
    length ``rest[r]``, the common column ``C`` where the prefixes end and the width ``W``."""

    cached: list[int]
    rest: list[int]
    C: int
    W: int

    def repeated(self, n: int) -> Layout:
        """The layout of the batch with each row repeated ``n`` times in a row (a prompt's samples)."""
        return Layout([c for c in self.cached for _ in range(n)], [m for m in self.rest for _ in range(n)],
                      self.C, self.W)


def assemble(prompts: list[list[int]], hits: list[tuple[Entry | None, int]], pad_id: int, device: Any
             ) -> tuple[Any, Any, Any, Layout]:
    """Ids, attention mask and a ``DynamicCache`` holding each row's cached prefix (``None`` when
    no row has one), laid out as the module says."""
    import torch
    from transformers import DynamicCache

    cached = [n for _, n in hits]
    rest = [len(p) - n for p, n in zip(prompts, cached, strict=True)]
    C, N = max(cached), max(rest)
    W = C + N
    ids = torch.full((len(prompts), W), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(prompts), W), dtype=torch.long)
    for r, p in enumerate(prompts):
        n, m = cached[r], rest[r]
        ids[r, C - n:C] = torch.tensor(p[:n], dtype=torch.long)
        mask[r, C - n:C] = 1
        ids[r, W - m:] = torch.tensor(p[n:], dtype=torch.long)
        mask[r, W - m:] = 1
    cache = None
    if C:
        ref = next(e for e, n in hits if e is not None and n)
        layers = []
        for layer, (k0, v0) in enumerate(ref.kv):
            heads, dim = k0.shape[0], k0.shape[-1]
            keys = k0.new_zeros((len(prompts), heads, C, dim))
            values = v0.new_zeros((len(prompts), heads, C, v0.shape[-1]))
            for r, (entry, n) in enumerate(hits):
                if entry is not None and n:
                    k, v = entry.kv[layer]
                    keys[r, :, C - n:] = k[:, :n]
                    values[r, :, C - n:] = v[:, :n]
            layers.append((keys, values))
        cache = DynamicCache(ddp_cache_data=layers)
    return ids.to(device), mask.to(device), cache, Layout(cached, rest, C, W)


def plain_layers(cache: Any) -> bool:
    """Whether every layer of ``cache`` is a plain full-attention ``DynamicLayer`` (what the store
    can cut and join; sliding-window and other layers are left alone)."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None) or []
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def rows_kv(cache: Any, layout: Layout, row: int, generated: int) -> list[tuple[Any, Any]]:
    """Row ``row``'s keys and values from a cache laid out by :func:`assemble` and extended by
    ``generate``: its prefix, the rest of its prompt and its first ``generated`` reply ids."""
    import torch

    n, m, C, W = layout.cached[row], layout.rest[row], layout.C, layout.W
    out = []
    for layer in cache.layers:
        k, v = layer.keys[row], layer.values[row]
        out.append((torch.cat([k[:, C - n:C], k[:, W - m:W + generated]], dim=1),
                    torch.cat([v[:, C - n:C], v[:, W - m:W + generated]], dim=1)))
    return out


__all__ = ["BLOCK", "Entry", "Layout", "PrefixStore", "assemble", "block_hashes", "plain_layers", "rows_kv"]
