"""Training runs in the results store (the same SQLite file as evaluations) and as JSONL.

Two tables, added beside the evaluation tables (``CREATE TABLE IF NOT EXISTS``; nothing existing
changes):

- ``training_runs``: one row per run — kind (``sft`` | ``grpo``), status (``running`` |
  ``finished`` | ``failed``), times, git commit, preset, model, output directory, the full config
  (JSON), package versions, duration and a summary (JSON: final metrics, parameter count, ...).
- ``training_metrics``: one row per logged step — run id, step, seconds since the start, and the
  metrics (JSON object: whatever the trainer logged plus ``tokens_per_s``; see
  :data:`METRIC_KEYS` for the names a reader can rely on).

Readers (the dashboard, ``gpu-arena runs``): :func:`list_training_runs` and
:func:`load_training_run`. This module needs only the standard library, so a server without the
``train`` extra can read runs.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS training_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    git_commit TEXT,
    preset TEXT,
    model TEXT,
    output_dir TEXT,
    config TEXT NOT NULL,
    versions TEXT NOT NULL,
    duration_s REAL,
    summary TEXT
);
CREATE TABLE IF NOT EXISTS training_metrics (
    run_id INTEGER NOT NULL REFERENCES training_runs(id),
    step INTEGER NOT NULL,
    elapsed_s REAL NOT NULL,
    metrics TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS training_metrics_run ON training_metrics(run_id, step);
"""

# Metric names a reader can rely on (others may be present: everything the trainer logs is kept).
METRIC_KEYS = {
    "loss": "training loss (SFT: token cross-entropy on assistant turns; GRPO: the policy loss)",
    "tokens_per_s": "tokens processed per wall-clock second since the previous log",
    "reward": "GRPO: mean total reward of the step's rollouts (= mean episode return)",
    "reward_std": "GRPO: standard deviation of that reward",
    "arena/valid_action_rate": "GRPO: rounds whose action the rules accepted / rounds played",
    "arena/format_error_rate": "GRPO: rounds lost to unreadable tool calls / rounds played",
    "arena/episodes_per_min": "GRPO: rollouts (whole episodes) finished per wall-clock minute",
    "rewards/<column>/mean": "GRPO: each of the 11 reward columns, summed over an episode, mean over rollouts",
    "mean_token_accuracy": "SFT: next-token accuracy on assistant turns",
}

JSONL_NAME = "metrics.jsonl"
CONFIG_NAME = "run_config.json"


def ensure_schema(con: sqlite3.Connection) -> None:
    con.executescript(SCHEMA)


def connect(path: str | Path | None = None) -> sqlite3.Connection:
    """The results store (``.arena/arena.db``, ``$GPU_ARENA_DB`` or ``path``) with the training tables
    (created if missing: this is the writer's connection)."""
    from ..evaluation.store import connect as connect_store

    con = connect_store(path)
    ensure_schema(con)
    return con


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _clean(value: Any) -> Any:
    """JSON-safe numbers: NaN and infinities become null (SQLite JSON and browsers reject them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def start_run(con: sqlite3.Connection, *, kind: str, config: dict[str, Any], preset: str | None = None,
              model: str | None = None, output_dir: str | None = None, git_commit: str | None = None,
              versions: dict[str, str] | None = None) -> int:
    ensure_schema(con)
    with con:
        cur = con.execute(
            "INSERT INTO training_runs (kind, status, created_at, git_commit, preset, model, output_dir, config, "
            "versions) VALUES (?,?,?,?,?,?,?,?,?)",
            (kind, "running", _now(), git_commit, preset, model, output_dir,
             json.dumps(_clean(config), default=str), json.dumps(versions or {})))
    return int(cur.lastrowid or 0)


def log_metrics(con: sqlite3.Connection, run_id: int, step: int, elapsed_s: float, metrics: dict[str, Any]) -> None:
    with con:
        con.execute("INSERT INTO training_metrics (run_id, step, elapsed_s, metrics) VALUES (?,?,?,?)",
                    (run_id, int(step), float(elapsed_s), json.dumps(_clean(metrics), default=str)))


def finish_run(con: sqlite3.Connection, run_id: int, *, status: str, duration_s: float,
               summary: dict[str, Any] | None = None) -> None:
    with con:
        con.execute("UPDATE training_runs SET status = ?, finished_at = ?, duration_s = ?, summary = ? WHERE id = ?",
                    (status, _now(), duration_s, json.dumps(_clean(summary or {}), default=str), run_id))


def _has_tables(con: sqlite3.Connection) -> bool:
    """Whether the store has the training tables (readers never create them: the dashboard opens
    the store read-only)."""
    row = con.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                      "('training_runs', 'training_metrics')").fetchone()
    return bool(row and row[0] == 2)


def _run_row(row: sqlite3.Row | tuple[Any, ...]) -> dict[str, Any]:
    from ..evaluation.store import stored_json

    (rid, kind, status, created, finished, commit, preset, model, out, config, versions, duration, summary,
     steps, last_step) = row
    what = f"training run {rid}"
    return {"id": rid, "kind": kind, "status": status, "created_at": created, "finished_at": finished,
            "git_commit": commit, "preset": preset, "model": model, "output_dir": out,
            "config": stored_json(config, f"{what}'s config"), "versions": stored_json(versions, f"{what}'s versions"),
            "duration_s": duration, "summary": stored_json(summary, f"{what}'s summary") if summary else None,
            "n_logs": steps, "last_step": last_step}


_RUN_COLUMNS = ("r.id, r.kind, r.status, r.created_at, r.finished_at, r.git_commit, r.preset, r.model, r.output_dir, "
                "r.config, r.versions, r.duration_s, r.summary, "
                "(SELECT COUNT(*) FROM training_metrics m WHERE m.run_id = r.id), "
                "(SELECT MAX(step) FROM training_metrics m WHERE m.run_id = r.id)")


def list_training_runs(con: sqlite3.Connection, *, kind: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """Training runs, newest first: ``id, kind, status, created_at, finished_at, git_commit, preset,
    model, output_dir, config, versions, duration_s, summary, n_logs, last_step`` (config, versions
    and summary decoded from JSON). For the dashboard's run list and ``gpu-arena runs``. Reads only
    (works on a read-only connection; no training tables: no runs)."""
    from ..evaluation.store import SQLITE_MAX_INT

    if not _has_tables(con):
        return []
    limit = min(limit, SQLITE_MAX_INT)  # a larger limit lists them all
    where, args = ("WHERE r.kind = ?", (kind, limit)) if kind else ("", (limit,))
    rows = con.execute(f"SELECT {_RUN_COLUMNS} FROM training_runs r {where} ORDER BY r.id DESC LIMIT ?",
                       args).fetchall()
    return [_run_row(r) for r in rows]


def load_training_run(con: sqlite3.Connection, run_id: int) -> dict[str, Any] | None:
    """One run with its metric history, or None. Besides the fields of :func:`list_training_runs`:

    - ``metrics``: the logged rows in order, each ``{"step", "elapsed_s", **metrics}``;
    - ``series``: ``{name: {"step": [...], "value": [...]}}`` for every numeric metric (steps where
      a metric was not logged are left out), ready to plot.

    Reads only, like :func:`list_training_runs`.
    """
    from ..evaluation.store import StoreError, in_range, stored_json

    if not _has_tables(con) or not in_range(run_id):
        return None
    row = con.execute(f"SELECT {_RUN_COLUMNS} FROM training_runs r WHERE r.id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    out = _run_row(row)
    metrics = []
    series: dict[str, dict[str, list[float]]] = {}
    for step, elapsed, data in con.execute(
            "SELECT step, elapsed_s, metrics FROM training_metrics WHERE run_id = ? ORDER BY step, rowid", (run_id,)):
        values = stored_json(data, f"training run {run_id}'s metrics at step {step}")
        if not isinstance(values, dict):
            raise StoreError(f"the store's training run {run_id} metrics at step {step} are not an object")
        metrics.append({"step": step, "elapsed_s": elapsed, **values})
        for name, v in values.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                s = series.setdefault(name, {"step": [], "value": []})
                s["step"].append(step)
                s["value"].append(float(v))
    out["metrics"] = metrics
    out["series"] = series
    return out


class RunLog:
    """Writes one training run to the store and to ``<output_dir>/metrics.jsonl`` (one JSON object a
    log: ``step``, ``elapsed_s`` and the metrics) and ``<output_dir>/run_config.json``."""

    def __init__(self, *, kind: str, config: dict[str, Any], output_dir: str | Path, preset: str | None,
                 model: str | None, db: str | Path | None = None) -> None:
        from ..evaluation.store import git_commit, versions

        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.con = connect(db)
        vers = versions()
        for pkg in ("torch", "transformers", "trl", "peft", "datasets", "accelerate"):
            try:
                from importlib import metadata

                vers[pkg] = metadata.version(pkg)
            except Exception:
                vers[pkg] = "missing"
        self.commit = git_commit()
        self.run_id = start_run(self.con, kind=kind, config=config, preset=preset, model=model,
                                output_dir=str(self.output_dir), git_commit=self.commit, versions=vers)
        self.started = time.perf_counter()
        record = {"run_id": self.run_id, "kind": kind, "preset": preset, "model": model, "git_commit": self.commit,
                  "versions": vers, "config": config}
        (self.output_dir / CONFIG_NAME).write_text(json.dumps(_clean(record), indent=2, default=str))
        self._jsonl = open(self.output_dir / JSONL_NAME, "w")  # noqa: SIM115 - closed in finish(); one run per directory

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        elapsed = time.perf_counter() - self.started
        log_metrics(self.con, self.run_id, step, elapsed, metrics)
        self._jsonl.write(json.dumps(_clean({"step": step, "elapsed_s": elapsed, **metrics}), default=str) + "\n")
        self._jsonl.flush()

    def finish(self, status: str, summary: dict[str, Any] | None = None) -> float:
        duration = time.perf_counter() - self.started
        finish_run(self.con, self.run_id, status=status, duration_s=duration, summary=summary)
        self._jsonl.close()
        return duration


__all__ = ["METRIC_KEYS", "RunLog", "connect", "finish_run", "list_training_runs", "load_training_run",
           "log_metrics", "start_run"]
