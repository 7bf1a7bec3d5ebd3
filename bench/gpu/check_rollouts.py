"""The GPU check of the rollout engine: how busy RL sampling keeps a CUDA device, as JSON.

Run on a CUDA machine, from the project root, as one command (no network needed: see the guide's
"Training on a GPU" for carrying the wheels the machine lacks)::

    python bench/gpu/check_rollouts.py --out gpu_rollouts.json

For each model shape (``small``: the preset's 2.3M-parameter Llama; ``qwen0.5b``: a model of
Qwen2.5-0.5B's shape, 24 layers of 896, its 151,936-token vocabulary), initialised at random from a
config (no weights to download), the engine plays ``--worlds`` single_trade train worlds per batch
size, greedy, every reply decoded under the seat's action grammar (so a random model's moves stay
valid), with ``--workers`` environment worker processes. Reported per run: episodes/min, turns/s,
the share of the wall time inside ``generate`` (target for the 0.5B shape: at least 0.8), the
workers' CPU seconds, and the GPU's utilization sampled by ``nvidia-smi`` every 0.2 s during the
run (mean and median, percent). ``--device cpu`` runs the same check without a GPU (no
utilization), for a smoke test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QWEN05B = {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
           "num_key_value_heads": 2, "vocab_size": 151936}


class Utilization:
    """``nvidia-smi``'s GPU utilization, sampled every ``period`` seconds on a thread while open."""

    def __init__(self, period: float = 0.2) -> None:
        self.period = period
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                      "-i", "0"], capture_output=True, text=True, timeout=5).stdout.strip()
                self.samples.append(float(out.splitlines()[0]))
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                return  # no nvidia-smi here: no figure
            self._stop.wait(self.period)

    def __enter__(self) -> Utilization:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def summary(self) -> dict[str, float | None]:
        if not self.samples:
            return {"gpu_util_mean": None, "gpu_util_median": None, "samples": 0}
        return {"gpu_util_mean": round(statistics.fmean(self.samples), 1),
                "gpu_util_median": round(statistics.median(self.samples), 1), "samples": len(self.samples)}


def build_model(shape: str, tok: Any, device: str, dtype: Any) -> Any:
    """A model of ``shape`` initialised at random for ``tok`` (the 0.5B shape keeps Qwen's vocabulary
    size: its LM head is a third of its weights; ids past the tokenizer are never allowed by the
    grammar)."""
    import torch

    if shape == "small":
        from gpu_arena.training.presets import build_model as build
        from gpu_arena.training.presets import get_preset

        spec = get_preset("small").model
        assert spec is not None
        model = build(spec, tok, seed=0)
    else:
        from transformers import Qwen2Config, Qwen2ForCausalLM

        config = Qwen2Config(**{**QWEN05B, "vocab_size": max(QWEN05B["vocab_size"], len(tok))},
                             max_position_embeddings=32768, tie_word_embeddings=True,
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None)
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config)
        model.generation_config.eos_token_id = tok.eos_token_id
        model.generation_config.pad_token_id = tok.pad_token_id
    return model.to(device=device, dtype=dtype).eval()


def run(shape: str, tok: Any, worlds: int, batch: int, workers: int, device: str, dtype: Any) -> dict[str, Any]:
    from gpu_arena.native.report import engine_counts
    from gpu_arena.rollouts import RolloutEngine, SessionConfig, TransformersBackend, WorkerPool, World
    from gpu_arena.training.rollouts import chat_mode

    model = build_model(shape, tok, device, dtype)
    params = sum(p.numel() for p in model.parameters())
    config = SessionConfig(tok, constrained=True, chat_mode=chat_mode(tok))
    with WorkerPool(config, workers) as pool:
        engine = RolloutEngine(TransformersBackend(model, tok), pool, temperature=0.0, batch_size=batch,
                               max_new_tokens=64)
        engine.play([World("single_trade", "train", 90_000 + k) for k in range(min(batch, 8))])  # warm-up
        with Utilization() as util:
            rollouts, stats = engine.play([World("single_trade", "train", 100_000 + k) for k in range(worlds)])
    valid = sum(r.valid_turns for r in rollouts) / max(stats.turns, 1)
    del model
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
    return {"shape": shape, "parameters": params, "batch": batch, "workers": workers, "episodes": stats.episodes,
            "turns": stats.turns, "episodes_per_min": round(stats.episodes_per_min, 1),
            "turns_per_s": round(stats.turns_per_s, 1), "generate_share": round(stats.generate_share, 3),
            "seconds": round(stats.seconds, 2), "generate_s": round(stats.generate_seconds, 2),
            "worker_cpu_s": round(stats.worker_cpu_seconds, 2), "main_cpu_s": round(stats.main_cpu_seconds, 2),
            "valid_rate": round(valid, 4),
            "format_error_rate": round(sum(r.format_errors for r in rollouts) / max(stats.turns, 1), 4), "engine": sorted({r.engine for r in rollouts}),
            "engines": engine_counts((r.engine, r.engine_reason) for r in rollouts), **util.summary()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shapes", default="small,qwen0.5b")
    parser.add_argument("--batches", default="32,128")
    parser.add_argument("--worlds", type=int, default=256)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    import torch

    from bench_rollouts import build_tokenizer

    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    t0 = time.perf_counter()
    tok = build_tokenizer()
    out: dict[str, Any] = {"bench": "gpu_rollouts", "device": args.device, "dtype": str(dtype).removeprefix("torch."),
                           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available()
                           else None, "target_generate_share_qwen0.5b": 0.8, "runs": []}
    for shape in args.shapes.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            out["runs"].append(run(shape, tok, max(args.worlds, batch), batch, args.workers, args.device, dtype))
            print(json.dumps(out["runs"][-1]), file=sys.stderr, flush=True)
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(out)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
