"""Pieces both trainers share: the logging callback, the device, the model a run starts from."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from .presets import (
    Preset,
    PresetError,
    build_model,
    corpus_for_tokenizer,
    load_pretrained,
    param_count,
    smollm2_gguf,
    train_tokenizer,
)
from .runlog import RunLog


def use_cpu() -> bool:
    """Train on the CPU unless a CUDA device is there (``GPU_ARENA_TRAIN_CPU=1`` forces the CPU)."""
    import torch

    return os.environ.get("GPU_ARENA_TRAIN_CPU") == "1" or not torch.cuda.is_available()


class MetricsCallback(TrainerCallback):
    """Sends every trainer log to the :class:`RunLog` (store + JSONL), adding ``tokens_per_s`` (and,
    for GRPO, ``arena/episodes_per_min``) measured between logs."""

    def __init__(self, runlog: RunLog, *, episodes_per_step: int | None = None) -> None:
        self.runlog = runlog
        self.episodes_per_step = episodes_per_step
        self._last_time = time.perf_counter()
        self._last_tokens = 0.0
        self._last_step = 0
        self.last: dict[str, Any] = {}

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs:
            return
        now = time.perf_counter()
        dt = max(now - self._last_time, 1e-9)
        metrics = {k: v for k, v in logs.items() if isinstance(v, int | float | str | bool)}
        tokens = float(logs.get("num_tokens", getattr(state, "num_input_tokens_seen", 0)) or 0)
        if tokens > self._last_tokens:
            metrics["tokens_per_s"] = (tokens - self._last_tokens) / dt
        if self.episodes_per_step and state.global_step > self._last_step:
            metrics["arena/episodes_per_min"] = 60.0 * self.episodes_per_step * (state.global_step - self._last_step) / dt
        self._last_time, self._last_tokens, self._last_step = now, tokens, state.global_step
        self.last.update(metrics)  # the latest value of every metric (the final summary log has no reward)
        self.runlog.log(int(state.global_step), metrics)


@dataclass
class StartingModel:
    model: Any
    tokenizer: Any
    source: str  # where the weights came from, for the run record
    built: bool  # initialised from a config here


def starting_model(preset: Preset, model: str | None, records: list[dict[str, Any]] | None, seed: int) -> StartingModel:
    """The model a run starts from: ``model`` (a checkpoint directory or a ``.gguf`` file) if given;
    else the preset's config with a tokenizer trained on ``records`` (tiny, small) or the SmolLM2
    GGUF (smollm2)."""
    if model is not None:
        m, tok = load_pretrained(model)
        return StartingModel(m, tok, str(model), built=False)
    if preset.model is not None:
        if not records:
            raise PresetError(f"preset {preset.name} builds its tokenizer from SFT data; none given")
        tok = train_tokenizer(corpus_for_tokenizer(records), preset.model.vocab_size)
        m = build_model(preset.model, tok, seed=seed)
        return StartingModel(m, tok, f"config:{preset.name}", built=True)
    gguf = smollm2_gguf()
    m, tok = load_pretrained(gguf)
    return StartingModel(m, tok, f"gguf:{gguf.name}", built=False)


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit`` while a run trains, so a killed run is recorded as failed
    (a plain SIGTERM ends the process before any ``except`` or ``finally`` runs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def logged_run(runlog: RunLog, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``body`` (training; returns the summary) and record how it ended: ``finished`` with the
    summary, or ``failed`` with the error, also when the process is terminated."""
    with terminate_as_exit():
        try:
            summary = body()
        except BaseException as e:
            runlog.finish("failed", {"error": f"{type(e).__name__}: {e}"})
            raise
    duration = runlog.finish("finished", summary)
    return {"run_id": runlog.run_id, "output_dir": str(runlog.output_dir), "duration_s": duration, **summary}


def describe_model(m: Any) -> dict[str, Any]:
    cfg = m.config
    return {"architecture": type(m).__name__, "parameters": param_count(m), "vocab_size": cfg.vocab_size,
            "hidden_size": getattr(cfg, "hidden_size", None), "layers": getattr(cfg, "num_hidden_layers", None)}


def check_output_dir(path: str | Path, overwrite: bool) -> Path:
    out = Path(path)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise PresetError(f"{out} exists and is not empty; pass --overwrite or choose another --output")
    out.mkdir(parents=True, exist_ok=True)
    return out


__all__ = ["MetricsCallback", "StartingModel", "check_output_dir", "describe_model", "logged_run", "starting_model",
           "terminate_as_exit", "use_cpu"]
