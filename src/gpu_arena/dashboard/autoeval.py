"""First-run evaluation: when the store holds no evaluation run, fill it in the background.

A newcomer's first ``make run`` would otherwise show an empty Results section. With the
``auto_eval`` setting on (``gpu-arena serve`` turns it on), start-up checks the store and, if it
holds no evaluation run, starts ``gpu-arena eval`` for each configured split, one after the other,
in a subprocess: the same command a person would type, so the run it stores is an ordinary one
(git commit, arguments, seeds, replays). The server never waits for it.

Why a subprocess and not a thread: an evaluation is seconds of GIL-bound Python, and a thread
would stall the event loop that serves the page and the sessions meanwhile. The subprocess runs at
a lower priority (``nice``), with one worker, and is stopped after ``auto_eval_timeout_s`` or when
the server shuts down, whichever comes first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import IO, Any

from .._process import end_process
from ..core.types import SPLITS, TASKS
from ..evaluation.store import db_path, latest_run
from ..server.settings import ServerSettings

log = logging.getLogger("gpu_arena.server")

_DEFAULTS = ServerSettings()  # an empty variable (GPU_ARENA_AUTO_EVAL_TASKS=) means the default list
DEFAULT_POLICIES = _DEFAULTS.auto_eval_policies
DEFAULT_TASKS = _DEFAULTS.auto_eval_tasks
DEFAULT_SPLITS = _DEFAULTS.auto_eval_splits


def _items(value: str | None, default: str) -> list[str]:
    return [x.strip() for x in (value or default).split(",") if x.strip()]


def _lower_priority() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(OSError):
        os.nice(10)


class AutoEval:
    """The background first-run evaluation of one server.

    Contract:

    * ``start()`` returns at once. With the setting off, the state is ``off``; with an
      evaluation run already in the store, ``skipped``; otherwise ``running`` until every split's
      ``gpu-arena eval`` has exited: then ``done``, or ``failed`` (a non-zero exit, a timeout, a
      bad setting) with a message. It never starts twice.
    * ``status()`` is a JSON-ready snapshot of that state, for ``/api/auto-eval`` and the page.
    * ``stop()`` ends the child process it started (terminate, then kill) and waits for the
      thread; the state becomes ``failed`` ("stopped") if it was still running.
    """

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.policies = _items(settings.auto_eval_policies, DEFAULT_POLICIES)
        self.tasks = _items(settings.auto_eval_tasks, DEFAULT_TASKS)
        self.splits = _items(settings.auto_eval_splits, DEFAULT_SPLITS)
        self._lock = threading.Lock()
        self._state = "off" if not settings.auto_eval else "idle"
        self._message = "" if settings.auto_eval else "turned off (GPU_ARENA_AUTO_EVAL=0 or --no-auto-eval)"
        self._started_at: float | None = None
        self._finished_at: float | None = None
        self._current: str | None = None
        self._completed: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ files

    @property
    def db(self) -> Path:
        return db_path(self.settings.db).resolve()

    @property
    def out_dir(self) -> Path:
        """Where the runs' JSON results, replays and the log go: beside the store."""
        return self.db.parent / "auto-eval"

    def command(self, split: str) -> list[str]:
        """The ``gpu-arena eval`` command line for one split (the child runs exactly this)."""
        out = self.out_dir
        return [sys.executable, "-m", "gpu_arena.cli", "eval", "--split", split,
                "--seeds", str(self.settings.auto_eval_seeds), "--policies", ",".join(self.policies),
                "--tasks", ",".join(self.tasks), "--workers", "1", "--db", str(self.db),
                "--out", str(out / f"{split}-results.json"), "--replays", str(out / f"{split}-replays.jsonl")]

    def display_command(self, split: str) -> str:
        """The same command as a person would type it."""
        return "gpu-arena " + " ".join(self.command(split)[3:])

    # ------------------------------------------------------------------ life cycle

    def problem(self) -> str | None:
        """What is wrong with the settings, if anything (checked before anything starts)."""
        from ..policies import make_policy

        if not self.policies or not self.tasks or not self.splits:
            return "auto_eval_policies, auto_eval_tasks and auto_eval_splits must each name at least one"
        for t in self.tasks:
            if t not in TASKS:
                return f"unknown task {t!r} in auto_eval_tasks; expected {', '.join(TASKS)}"
        for s in self.splits:
            if s not in SPLITS:
                return f"unknown split {s!r} in auto_eval_splits; expected {', '.join(SPLITS)}"
        for p in self.policies:
            try:
                make_policy(p)
            except ValueError as e:
                return f"auto_eval_policies: {e}"
        return None

    def existing_run(self) -> int | None:
        """The id of the store's latest evaluation run (None: no store, or no run in it)."""
        if not self.db.is_file():
            return None
        try:
            with closing(sqlite3.connect(f"{self.db.as_uri()}?mode=ro", uri=True)) as con:
                run = latest_run(con)
        except sqlite3.Error:  # no results tables yet: nothing was evaluated
            return None
        return None if run is None else int(run["id"])

    def start(self) -> None:
        with self._lock:
            if self._state != "idle":
                return
            run = self.existing_run()
            if run is not None:
                self._state, self._message = "skipped", f"the store already holds evaluation run #{run}"
                return
            problem = self.problem()
            if problem is not None:
                self._state, self._message = "failed", problem
                log.error("first-run evaluation not started: %s", problem)
                return
            self._state, self._started_at = "running", time.time()
            self._message = "a first evaluation is filling the empty store"
            self._thread = threading.Thread(target=self._run, name="gpu-arena-auto-eval", daemon=True)
            self._thread.start()
        log.info("first-run evaluation started in the background (%s)", ", ".join(self.splits))

    def _run(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.settings.auto_eval_timeout_s
        with (self.out_dir / "auto-eval.log").open("ab") as logfile:
            for split in self.splits:
                outcome = self._run_split(split, deadline, logfile)
                if outcome is not None:
                    self._finish("failed", outcome)
                    return
        self._finish("done", f"stored {len(self._completed)} evaluation run(s): {', '.join(self._completed)}")

    def _run_split(self, split: str, deadline: float, logfile: IO[bytes]) -> str | None:
        with self._lock:
            if self._stopping.is_set():
                return "stopped with the server"
            self._current = split
            self._proc = subprocess.Popen(
                self.command(split), stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_lower_priority if os.name == "posix" else None)
            proc = self._proc
        try:
            rc = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            end_process(proc, grace_s=5)
            return f"stopped after {self.settings.auto_eval_timeout_s:g} s (auto_eval_timeout_s) during {split}"
        if self._stopping.is_set():
            return "stopped with the server"
        if rc != 0:
            return f"gpu-arena eval --split {split} exited with status {rc}; see {self.out_dir / 'auto-eval.log'}"
        with self._lock:
            self._completed.append(split)
        return None

    def _finish(self, state: str, message: str) -> None:
        with self._lock:
            self._state, self._message = state, message
            self._finished_at, self._current, self._proc = time.time(), None, None
        (log.info if state == "done" else log.warning)("first-run evaluation %s: %s", state, message)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            proc = self._proc
        if proc is not None:
            end_process(proc, grace_s=5)
        if self._thread is not None:
            self._thread.join(timeout=10)

    # ------------------------------------------------------------------ reading

    def status(self) -> dict[str, Any]:
        with self._lock:
            now = time.time()
            return {
                "enabled": self.settings.auto_eval, "state": self._state, "message": self._message,
                "started_at": _iso(self._started_at), "finished_at": _iso(self._finished_at),
                "elapsed_s": None if self._started_at is None else (self._finished_at or now) - self._started_at,
                "current_split": self._current, "completed_splits": list(self._completed),
                "splits": self.splits, "tasks": self.tasks, "policies": self.policies,
                "seeds": self.settings.auto_eval_seeds,
                "episodes": len(self.splits) * len(self.tasks) * len(self.policies) * self.settings.auto_eval_seeds,
                "commands": [self.display_command(s) for s in self.splits],
            }


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


__all__ = ["AutoEval"]
