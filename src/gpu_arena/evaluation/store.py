"""The embedded results store: SQLite, one file (default ``.arena/arena.db``, or ``GPU_ARENA_DB``).

A run records what made it (git commit, arguments, seeds, package versions, time, duration), its
aggregated rows, every episode (return and, when kept, the replay as compact JSON) and the
LLM ledgers of the models that took part (``llm_usage``). Episodes
played against the server are kept apart, one row per finished episode, keyed by a replay id.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import subprocess
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from .runner import EpisodeResult

DEFAULT_DB = Path(".arena") / "arena.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    git_commit TEXT,
    args TEXT NOT NULL,
    seeds TEXT NOT NULL,
    versions TEXT NOT NULL,
    duration_s REAL
);
CREATE TABLE IF NOT EXISTS results (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    policy TEXT NOT NULL, task TEXT NOT NULL, split TEXT NOT NULL,
    n INTEGER NOT NULL, mean REAL, ci_low REAL, ci_high REAL,
    row TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS episodes (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    policy TEXT NOT NULL, task TEXT NOT NULL, split TEXT NOT NULL, seed INTEGER NOT NULL,
    episode_return REAL NOT NULL,
    replay TEXT
);
CREATE INDEX IF NOT EXISTS episodes_run ON episodes(run_id, task, policy, seed);
CREATE TABLE IF NOT EXISTS served_episodes (
    replay_id TEXT PRIMARY KEY,
    episode_id TEXT,
    created_at TEXT NOT NULL,
    task TEXT NOT NULL, split TEXT NOT NULL, seed INTEGER NOT NULL, seat TEXT NOT NULL,
    judge_mode TEXT NOT NULL,
    episode_return REAL,
    replay TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS optima (
    task TEXT NOT NULL, split TEXT NOT NULL, seed INTEGER NOT NULL, fingerprint TEXT NOT NULL,
    optimum REAL NOT NULL,
    PRIMARY KEY (task, split, seed, fingerprint)
);
CREATE TABLE IF NOT EXISTS llm_usage (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    policy TEXT NOT NULL, task TEXT NOT NULL, split TEXT NOT NULL,
    role TEXT NOT NULL, agent TEXT NOT NULL,
    episodes INTEGER NOT NULL, calls INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
    model_s REAL NOT NULL, format_errors INTEGER NOT NULL,
    row TEXT NOT NULL
);
"""


def db_path(path: str | os.PathLike[str] | None = None) -> Path:
    return Path(path or os.environ.get("GPU_ARENA_DB") or DEFAULT_DB)


SQLITE_MAX_INT = 2**63 - 1  # an id or a count beyond SQLite's 64-bit integers names no row


class StoreError(RuntimeError):
    """The store cannot be used: its file cannot be opened or is not a SQLite database, or a row
    was changed outside the project (a JSON column that does not parse). The CLI reports it in one
    line; the server answers ``503 store_unreadable``."""


def connect(path: str | os.PathLike[str] | None = None) -> sqlite3.Connection:
    p = db_path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(p)
        con.executescript(SCHEMA)
    except (OSError, sqlite3.DatabaseError) as e:
        raise StoreError(f"{p} cannot be used as the store: {e}") from e
    return con


def stored_json(text: str | bytes, what: str) -> Any:
    """A JSON column read back; :class:`StoreError` naming ``what`` where it is not JSON (a row
    changed outside the project), rather than a decoding error far from the store."""
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError) as e:
        raise StoreError(f"the store's {what} is not readable JSON ({e}); was the file changed by hand?") from None


def in_range(value: int) -> bool:
    """Whether ``value`` fits a SQLite integer (a larger id names no row; asking would overflow)."""
    return -SQLITE_MAX_INT - 1 <= value <= SQLITE_MAX_INT


def git_commit() -> str | None:
    """The commit of the checkout this package runs from; where the source is no checkout (a copy
    made with ``git archive`` so a long run is not disturbed by edits, an installed wheel),
    ``$GPU_ARENA_COMMIT`` if set, else None."""
    source = Path(__file__).resolve().parents[3]
    fallback = os.environ.get("GPU_ARENA_COMMIT") or None
    try:
        out = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5, check=False)
    except OSError:
        return fallback
    return (out.stdout.strip() if out.returncode == 0 else "") or fallback


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("gpu-arena", "openenv", "numpy", "scipy", "pydantic"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "missing"
    return out


def save_run(con: sqlite3.Connection, *, kind: str, args: dict[str, Any], seeds: Sequence[int],
             rows: Sequence[dict[str, Any]], episodes: Sequence[EpisodeResult], duration_s: float) -> int:
    with con:
        cur = con.execute(
            "INSERT INTO runs (kind, created_at, git_commit, args, seeds, versions, duration_s) VALUES (?,?,?,?,?,?,?)",
            (kind, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), git_commit(), json.dumps(args),
             json.dumps(list(seeds)), json.dumps(versions()), duration_s))
        run_id = int(cur.lastrowid or 0)
        con.executemany(
            "INSERT INTO results (run_id, policy, task, split, n, mean, ci_low, ci_high, row) VALUES (?,?,?,?,?,?,?,?,?)",
            [(run_id, r["policy"], r["task"], r["split"], r["n"], r["mean"], r["ci_low"], r["ci_high"], json.dumps(r))
             for r in rows])
        con.executemany(
            "INSERT INTO episodes (run_id, policy, task, split, seed, episode_return, replay) VALUES (?,?,?,?,?,?,?)",
            [(run_id, e.policy, e.task, e.split, e.seed, e.episode_return,
              replay_text(e.replay) if e.replay else None) for e in episodes])
    return run_id


def replay_text(record: dict[str, Any]) -> str | None:
    """A replay record as the store keeps it: standard JSON, or None where it holds what standard
    JSON cannot carry (NaN, Infinity, a lone surrogate). SQLite's JSON functions refuse such a row,
    and one of them would hide every stored episode from the lists that read them; the engine's
    transcripts never hold one, so this guards what else a record may carry."""
    try:
        text = json.dumps(record, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        return None
    return text


def latest_run(con: sqlite3.Connection, kind: str = "eval") -> dict[str, Any] | None:
    row = con.execute("SELECT id, created_at, git_commit, args, seeds, versions, duration_s FROM runs "
                      "WHERE kind = ? ORDER BY id DESC LIMIT 1", (kind,)).fetchone()
    return None if row is None else load_run(con, row[0])


def latest_run_for_split(con: sqlite3.Connection, split: str, kind: str = "eval") -> dict[str, Any] | None:
    """The newest run of ``kind`` with results for ``split`` (an eval run covers one split, so the
    newest run overall may not have the split a reader asks for)."""
    row = con.execute("SELECT runs.id FROM runs JOIN results ON results.run_id = runs.id "
                      "WHERE runs.kind = ? AND results.split = ? ORDER BY runs.id DESC LIMIT 1",
                      (kind, split)).fetchone()
    return None if row is None else load_run(con, row[0])


def load_run(con: sqlite3.Connection, run_id: int) -> dict[str, Any] | None:
    if not in_range(run_id):
        return None
    row = con.execute("SELECT id, kind, created_at, git_commit, args, seeds, versions, duration_s FROM runs WHERE id = ?",
                      (run_id,)).fetchone()
    if row is None:
        return None
    results = [stored_json(r[0], f"result row of run {run_id}")
               for r in con.execute("SELECT row FROM results WHERE run_id = ? ORDER BY rowid", (run_id,))]
    if not all(isinstance(r, dict) for r in results):
        raise StoreError(f"the store's result rows of run {run_id} are not objects; was the file changed by hand?")
    what = f"run {run_id}"
    return {"id": row[0], "kind": row[1], "created_at": row[2], "git_commit": row[3],
            "args": stored_json(row[4], f"{what}'s arguments"), "seeds": stored_json(row[5], f"{what}'s seeds"),
            "versions": stored_json(row[6], f"{what}'s versions"), "duration_s": row[7], "results": results}


def load_returns(con: sqlite3.Connection, run_id: int) -> list[tuple[str, str, str, int, float]]:
    """Every episode's return in a run, as (policy, task, split, seed, return), for paired statistics."""
    return [(r[0], r[1], r[2], int(r[3]), float(r[4])) for r in con.execute(
        "SELECT policy, task, split, seed, episode_return FROM episodes WHERE run_id = ? ORDER BY rowid", (run_id,))]


def load_replay(con: sqlite3.Connection, run_id: int, policy: str, task: str, seed: int) -> dict[str, Any] | None:
    row = con.execute("SELECT replay FROM episodes WHERE run_id=? AND policy=? AND task=? AND seed=?",
                      (run_id, policy, task, seed)).fetchone()
    return stored_json(row[0], "episode replay") if row and row[0] else None


def load_optima(con: sqlite3.Connection) -> dict[tuple[str, str, int], tuple[str, float]]:
    """Cached exact optima, keyed by world; the fingerprint guards against a changed generator."""
    return {(t, sp, sd): (fp, opt) for t, sp, sd, fp, opt in
            con.execute("SELECT task, split, seed, fingerprint, optimum FROM optima")}


def save_optima(con: sqlite3.Connection, optima: dict[tuple[str, str, int], tuple[str, float]]) -> None:
    with con:
        con.executemany("INSERT OR REPLACE INTO optima (task, split, seed, fingerprint, optimum) VALUES (?,?,?,?,?)",
                        [(t, sp, sd, fp, opt) for (t, sp, sd), (fp, opt) in optima.items()])


def save_served_episode(con: sqlite3.Connection, record: dict[str, Any]) -> bool:
    """Store one finished server episode (a replay record with a ``replay_id``); False (nothing
    stored) where the record is not standard JSON (:func:`replay_text`)."""
    text = replay_text(record)
    if text is None:
        return False
    with con:
        con.execute(
            "INSERT INTO served_episodes (replay_id, episode_id, created_at, task, split, seed, seat, judge_mode, "
            "episode_return, replay) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (record["replay_id"], record.get("episode_id"), record["created_at"], record["task"], record["split"],
             int(record["seed"]), record["seat"], record.get("judge_mode", "none"), record.get("episode_return"),
             text))
    return True


def load_served_episode(con: sqlite3.Connection, replay_id: str) -> dict[str, Any] | None:
    row = con.execute("SELECT replay FROM served_episodes WHERE replay_id = ?", (replay_id,)).fetchone()
    return stored_json(row[0], f"episode {replay_id}") if row else None


def save_usage(con: sqlite3.Connection, run_id: int, rows: Sequence[dict[str, Any]]) -> None:
    """Store a run's LLM ledgers (rows of ``gpu_arena.evaluation.runner.usage_rows``)."""
    with con:
        con.executemany(
            "INSERT INTO llm_usage (run_id, policy, task, split, role, agent, episodes, calls, prompt_tokens, "
            "completion_tokens, model_s, format_errors, row) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(run_id, r["policy"], r["task"], r["split"], r["role"], r["agent"], r["episodes"], r["calls"],
              r["prompt_tokens"], r["completion_tokens"], r["model_s"], r["format_errors"], json.dumps(r))
             for r in rows])


def load_usage(con: sqlite3.Connection, run_id: int) -> list[dict[str, Any]]:
    """A run's LLM ledgers, in the order they were stored (empty if no model took part)."""
    return [stored_json(r[0], "LLM usage row") for r in con.execute("SELECT row FROM llm_usage WHERE run_id = ? ORDER BY rowid", (run_id,))]
