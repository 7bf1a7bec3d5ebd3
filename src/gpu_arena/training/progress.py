"""What a training command shows while it works: one rich progress line per stage, third-party noise
hidden.

A stage's line reads ``stage  ━━━━━━━━  step/total  loss 0.41 · valid 0.97 · 310 ep/min  0:01:12 < 0:03:40``:
the step and total, the latest loss or reward, the valid-action rate, episodes (or tokens) per
second, elapsed time and ETA. :class:`StageProgress` is the display; :class:`ProgressCallback`
feeds it from a ``transformers`` ``Trainer`` (SFT, GRPO) and replaces the trainer's own printer
of raw log dicts. :func:`quiet_third_party` hides deprecation, future and experimental warnings
and the libraries' own progress bars unless the user asks for ``--verbose``.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

# what the display shows from a metrics dict, in this order: (key, label, format)
SHOWN = (
    ("loss", "loss", ".3f"),
    ("reward", "reward", "+.3f"),
    ("arena/valid_action_rate", "valid", ".2f"),
    ("mean_token_accuracy", "acc", ".2f"),
    ("arena/episodes_per_min", "ep/min", ".0f"),
    ("arena/turns_per_s", "turns/s", ".0f"),
    ("generate_share", "gen", ".0%"),  # the share of sampling's wall time inside generate; the rest: environment
    ("tokens_per_s", "tok/s", ".0f"),
)


def describe(metrics: dict[str, Any]) -> str:
    """The metrics part of a progress line (missing or non-numeric values are left out)."""
    parts = []
    for key, label, spec in SHOWN:
        v = metrics.get(key)
        if isinstance(v, int | float) and v == v:  # not NaN
            parts.append(f"{label} {format(v, spec)}")
    return " · ".join(parts)


class StageProgress:
    """One progress line for one stage. Use as a context manager; ``update(completed, metrics)``.

    With ``enabled=False`` (not a terminal and not forced, or ``--json`` output) nothing is drawn
    and updates cost nothing."""

    def __init__(self, stage: str, total: int, *, console: Console | None = None, enabled: bool = True) -> None:
        self.stage = stage
        self.total = total
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task: Any = None
        self._console = console or Console(stderr=True)

    def __enter__(self) -> StageProgress:
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(),
                TextColumn("{task.fields[metrics]}"), TimeElapsedColumn(), TextColumn("<"), TimeRemainingColumn(),
                console=self._console, transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self.stage, total=self.total, metrics="")
        return self

    def update(self, completed: int, metrics: dict[str, Any] | None = None) -> None:
        if self._progress is None:
            return
        kwargs: dict[str, Any] = {"completed": completed}
        if metrics:
            kwargs["metrics"] = describe(metrics)
        self._progress.update(self._task, **kwargs)

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def progress_callback(display: StageProgress) -> Any:
    """A ``TrainerCallback`` that moves ``display`` with the trainer's steps and shows its latest
    logs (what was printed as raw dicts before)."""
    from transformers import TrainerCallback

    class ProgressCallback(TrainerCallback):
        def __init__(self) -> None:
            self.last: dict[str, Any] = {}

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.max_steps and state.max_steps > 0 and display.total != state.max_steps and display._progress:
                display.total = state.max_steps
                display._progress.update(display._task, total=state.max_steps)

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:
            if logs:
                self.last.update({k: v for k, v in logs.items() if isinstance(v, int | float)})
            display.update(int(state.global_step), self.last)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            display.update(int(state.global_step))

    return ProgressCallback()


def drop_printer(trainer: Any) -> None:
    """Remove the trainer's printer of raw log dicts (``disable_tqdm=True`` installs it); the store,
    ``metrics.jsonl`` and the progress line already carry every value."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


@contextmanager
def quiet_third_party(verbose: bool = False) -> Iterator[None]:
    """Hide third-party deprecation, future, experimental and user warnings, the libraries' info
    logs and their progress bars, unless ``verbose``. Errors and this project's output stay."""
    if verbose:
        yield
        return
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    restore: list[Any] = []
    try:
        import datasets
        import transformers

        restore.append((transformers.utils.logging.set_verbosity, transformers.utils.logging.get_verbosity()))
        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
        restore.append((lambda _: transformers.utils.logging.enable_progress_bar(), None))
        datasets.utils.logging.set_verbosity_error()
        datasets.disable_progress_bars()
        restore.append((lambda _: datasets.enable_progress_bars(), None))
    except ImportError:  # the train extra is missing: the command reports that itself
        pass
    loggers = [logging.getLogger(n) for n in ("trl", "peft", "accelerate", "torch")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    with warnings.catch_warnings():
        for category in (DeprecationWarning, FutureWarning, UserWarning, PendingDeprecationWarning):
            warnings.filterwarnings("ignore", category=category)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)
            for fn, value in reversed(restore):
                fn(value)


__all__ = ["StageProgress", "describe", "drop_printer", "progress_callback", "quiet_third_party"]
