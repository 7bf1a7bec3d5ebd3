"""A lookahead's prefill in one piece against the transformers backend's chunked prefill, as one JSON line.

Run: ``make bench`` (or ``python bench/bench_prefill.py [--quick]``).

The shape is the one that took an RFT iteration's model process past 7 GB (decision 0040): a
lookahead over 48 ``coalition_market`` worlds forks 96 rows a call; the prefix store holds each
row's earlier turns, so a call prefills the rest of rows some 4,000 ids wide. The model is the
``small`` preset's (randomly initialised: the cost does not depend on the weights). Each way runs
in a fresh process, so its peak resident memory (``VmHWM``) is its own.

* ``one_piece`` and ``chunked``: wall seconds of the prefill and the process's peak GB, and the
  chunk the backend's budget gives (ids of each row per forward).
* ``same_cache``: both ways leave the same keys (their sum, to 1e-4 relative): chunking changes
  what a forward holds, not what it computes.
* ``peak_ratio``: one piece's peak over the chunked one's. Target: at least 2 at the full size.
* ``mixed``: the same rows parting from their caches at different columns, as a lookahead's forks
  and an evaluation's episodes do (row ``r``'s rest spread evenly from one id to the whole width
  past the cache): one prefill from the earliest column against the backend's groups
  (``prefill_groups``), wall seconds each, ``same_cache`` over the columns the mask shows and
  ``speedup``. Target: above 1.3 at the full size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

ONE_PIECE = 1 << 62  # a budget no batch reaches: the whole rest in one forward


def peak_gb() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1e6
    return float("nan")


def small_backend(rows: int, width: int, budget: int) -> tuple[Any, Any]:
    """The ``small`` preset's model (randomly initialised) in a backend of prefill budget ``budget``,
    and ``rows`` random prompts of ``width`` ids."""
    import torch

    from gpu_arena.rollouts.backends import TransformersBackend
    from gpu_arena.training.presets import build_model, get_preset

    spec = get_preset("small").model
    assert spec is not None
    # what build_model reads of a tokenizer (the prefill reads none of it)
    tok = type("Vocab", (), {"__len__": lambda self: spec.vocab_size, "eos_token_id": 1, "pad_token_id": 0})()
    backend = TransformersBackend(build_model(spec, tok, seed=0), tok, prefill_budget=budget)
    return backend, torch.randint(2, spec.vocab_size, (rows, width), generator=torch.Generator().manual_seed(0))


def one(budget: int, rows: int, width: int, start: int) -> dict[str, Any]:
    """Prefill ``rows`` random prompts of ``width`` ids whose first ``start`` are cached already."""
    import torch

    from gpu_arena.rollouts.backends import prefill_chunk

    backend, ids = small_backend(rows, width, budget)
    mask = torch.ones_like(ids)
    cache = backend._prefill(ids[:, :start + 1], mask[:, :start + 1]) if start else None
    t0 = time.perf_counter()
    cache = backend._prefill(ids, mask, cache, start=start)
    seconds = time.perf_counter() - t0
    return {"seconds": round(seconds, 2), "peak_gb": round(peak_gb(), 3),
            "chunk": min(prefill_chunk(rows, width, budget), width - 1 - start),
            "key_sum": float(sum(layer.keys.double().sum() for layer in cache.layers))}


def mixed(grouped: int, rows: int, width: int, start: int) -> dict[str, Any]:
    """Prefill ``rows`` prompts whose first ``start`` ids are cached and whose rests spread from one
    id to ``width - start``: in the backend's groups, or (``grouped=0``) in one piece."""
    import torch

    from gpu_arena.rollouts.backends import PREFILL_BUDGET
    from gpu_arena.rollouts.kvcache import Layout

    backend, ids = small_backend(rows, width, PREFILL_BUDGET)
    rest = [1 + (width - start - 1) * r // max(1, rows - 1) for r in range(rows)]
    mask = torch.ones_like(ids)
    for r, m in enumerate(rest):  # row r: its cached prefix, pads, then its rest at the end
        mask[r, start:width - m] = 0
        ids[r, start:width - m] = 0
    cache = backend._prefill(ids[:, :start + 1], mask[:, :start + 1])
    layout = Layout([start] * rows, rest, start, width)
    t0 = time.perf_counter()
    cache = (backend._prefill_groups(ids, mask, cache, layout) if grouped
             else backend._prefill(ids, mask, cache, start=start))
    seconds = time.perf_counter() - t0
    seen = mask[:, :width - 1].bool()
    return {"seconds": round(seconds, 2),
            "key_sum": float(sum(layer.keys.permute(0, 2, 1, 3)[seen].double().sum() for layer in cache.layers))}


def measure(budget: int, rows: int, width: int, start: int, how: str = "--one") -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, how, str(budget), str(rows), str(width), str(start)],
                         check=True, capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="48 rows of 2,000 ids instead of 96 of 4,000")
    parser.add_argument("--size", type=int, nargs=3, metavar=("ROWS", "WIDTH", "CACHED"), help="override the shape")
    parser.add_argument("--budget", type=int, default=None, help="the chunked side's budget (default: the backend's)")
    parser.add_argument("--one", type=int, nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--mixed", type=int, nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(*args.one)))
        return 0
    if args.mixed:
        print(json.dumps(mixed(*args.mixed)))
        return 0
    from gpu_arena.rollouts.backends import PREFILL_BUDGET

    rows, width, start = args.size or ((48, 2000, 750) if args.quick else (96, 4000, 1500))
    budget = args.budget or PREFILL_BUDGET
    whole = measure(ONE_PIECE, rows, width, start)
    chunked = measure(budget, rows, width, start)
    flat, grouped = (measure(g, rows, width, start, "--mixed") for g in (0, 1))

    def same(x: dict[str, Any], y: dict[str, Any]) -> bool:
        """The two ways left the same keys (their sums, to 1e-4 relative); the sums leave the rows."""
        a, b = x.pop("key_sum"), y.pop("key_sum")
        return bool(abs(a - b) <= 1e-4 * max(1.0, abs(a)))

    chunks_same, groups_same = same(whole, chunked), same(flat, grouped)
    print(json.dumps({"bench": "prefill", "rows": rows, "width": width, "cached": start, "budget": budget,
                      "one_piece": whole, "chunked": chunked, "same_cache": chunks_same,
                      "peak_ratio": round(whole["peak_gb"] / chunked["peak_gb"], 2),
                      "mixed": {"one_piece": flat, "grouped": grouped,
                                "same_cache": groups_same,
                                "speedup": round(flat["seconds"] / max(grouped["seconds"], 1e-9), 2)}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
