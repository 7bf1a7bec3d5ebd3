"""Leagues in the SQLite store beside the evaluation runs: each league's arguments and its matches."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

LEAGUE_SCHEMA = """
CREATE TABLE IF NOT EXISTS leagues (
    league TEXT PRIMARY KEY,
    entrants TEXT NOT NULL,
    tasks TEXT NOT NULL,
    seed INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS league_matches (
    league TEXT NOT NULL REFERENCES leagues(league),
    idx INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (league, idx)
);
"""


def connect_league(path: str | None = None) -> sqlite3.Connection:
    from ..evaluation.store import connect

    con = connect(path)
    con.executescript(LEAGUE_SCHEMA)
    return con


def ensure_league(con: sqlite3.Connection, league: str, entrants: list[str], tasks: list[str], seed: int) -> None:
    with con:
        con.execute("INSERT OR IGNORE INTO leagues (league, entrants, tasks, seed, created_at) VALUES (?,?,?,?,?)",
                    (league, json.dumps(sorted(entrants)), json.dumps(tasks), seed, _now()))


def played_count(con: sqlite3.Connection, league: str) -> int:
    """How many matches of the league's stream are stored (they are 0..n-1: runs append in order)."""
    row = con.execute("SELECT COUNT(*), MAX(idx) FROM league_matches WHERE league = ?", (league,)).fetchone()
    count, last = int(row[0]), row[1]
    if count and last != count - 1:
        raise ValueError(f"league {league!r} has a gap in its matches (stored {count}, last index {last})")
    return count


def save_matches(con: sqlite3.Connection, league: str, records: list[dict[str, Any]]) -> None:
    with con:  # one transaction: a run that fails halfway stores none of its matches
        con.executemany("INSERT INTO league_matches (league, idx, created_at, record) VALUES (?,?,?,?)",
                        [(league, r["index"], _now(), json.dumps(r, separators=(",", ":"))) for r in records])


def load_matches(con: sqlite3.Connection, league: str) -> list[dict[str, Any]]:
    """The league's stored matches in schedule order, each with its replay reference ``ref``."""
    from ..evaluation.store import StoreError, stored_json

    out = []
    for text, rowid in con.execute("SELECT record, rowid FROM league_matches WHERE league = ? ORDER BY idx", (league,)):
        record = stored_json(text, f"league match {league_ref(rowid)}")
        if not isinstance(record, dict):
            raise StoreError(f"the store's league match {league_ref(rowid)} is not an object")
        out.append({**record, "ref": league_ref(rowid)})
    return out


def league_ref(rowid: int) -> str:
    """How Replays and ``GET /api/episodes/{ref}`` name a stored league match."""
    return f"league-{rowid}"


def leagues(con: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every league, the newest first."""
    from ..evaluation.store import stored_json

    rows = con.execute("SELECT l.league, l.entrants, l.tasks, l.seed, l.created_at, COUNT(m.idx) FROM leagues l "
                       "LEFT JOIN league_matches m ON m.league = l.league GROUP BY l.league "
                       "ORDER BY l.created_at DESC, l.rowid DESC").fetchall()
    return [{"league": r[0], "entrants": stored_json(r[1], f"league {r[0]!r}'s entrants"),
             "tasks": stored_json(r[2], f"league {r[0]!r}'s tasks"), "seed": r[3], "created_at": r[4],
             "matches": r[5]} for r in rows]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
