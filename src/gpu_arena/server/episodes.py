"""Stored episodes by reference, for replays and forks.

Two kinds of episode live in the store, and one reference names either:

* a **served** episode (one played against this server and finished): its replay id, 32 hex
  digits, as ``observation.metadata["replay_id"]`` reported it;
* an **evaluation** episode with a kept replay (``gpu-arena eval --replays``, the first-run
  evaluation): ``eval-<run id>-<n>``, where ``n`` is the episode's row in the store;
* a **league** match (``gpu-arena league run``): ``league-<n>``, its row in the store. Its record
  is seen from the seat of its best-placed entrant; the other seats are named by what held them.

Records come back as the store holds them plus the fields a replay needs that an evaluation
record leaves implicit (``seat``, ``judge_mode``, ``opponents``, ``policy``, ``episode_return``),
and ``ref`` / ``source``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from typing import Any

from ..core.opponents import DEFAULT_OPPONENTS
from ..evaluation.store import StoreError, db_path, load_served_episode, stored_json
from .recorder import EpisodeRecorder
from .settings import ServerSettings

SERVED_REF = re.compile(r"^[0-9a-f]{32}$")
EVAL_REF = re.compile(r"^eval-([0-9]{1,18})-([0-9]{1,18})$")
LEAGUE_REF = re.compile(r"^league-([0-9]{1,18})$")
EPISODE_REF_PATTERN = r"^([0-9a-f]{32}|eval-[0-9]{1,18}-[0-9]{1,18}|league-[0-9]{1,18})$"


def eval_ref(run_id: int, row: int) -> str:
    return f"eval-{run_id}-{row}"


def load_episode(settings: ServerSettings, recorder: EpisodeRecorder | None, ref: str) -> dict[str, Any] | None:
    """The stored episode ``ref`` names, normalised (see the module docstring), or None."""
    if SERVED_REF.match(ref):
        if recorder is not None:
            record = recorder.load(ref)
        else:
            record = _read(settings, lambda con: load_served_episode(con, ref))
        if record is None:
            return None
        return {"seat": "lab_0", "judge_mode": "none", "opponents": DEFAULT_OPPONENTS, **record,
                "ref": ref, "source": "served"}
    league = LEAGUE_REF.match(ref)
    if league is not None:
        found = _read(settings, lambda con: con.execute(
            "SELECT record, created_at FROM league_matches WHERE rowid = ?", (int(league.group(1)),)).fetchone())
        return None if found is None else league_replay(stored_json(found[0], f"league match {ref}"), ref, found[1])
    m = EVAL_REF.match(ref)
    if m is None:
        return None
    run_id, row = int(m.group(1)), int(m.group(2))
    found = _read(settings, lambda con: con.execute(
        "SELECT e.replay, e.policy, e.episode_return, r.args, r.created_at FROM episodes e "
        "JOIN runs r ON r.id = e.run_id WHERE e.rowid = ? AND e.run_id = ? AND e.replay IS NOT NULL",
        (row, run_id)).fetchone())
    if found is None:
        return None
    record, args = stored_json(found[0], f"episode {ref}"), stored_json(found[3], f"run {run_id}'s arguments")
    return {**record, "ref": ref, "source": "eval", "run_id": run_id, "policy": found[1],
            "episode_return": found[2], "created_at": found[4], "seat": record.get("seat") or "lab_0",
            "judge_mode": record.get("judge_mode") or args.get("judge_mode") or "none",
            # an evaluation meets the run's opponents (the world's archetypes unless --opponents said otherwise)
            "opponents": record.get("opponents") or args.get("opponents") or DEFAULT_OPPONENTS}


def league_replay(record: dict[str, Any], ref: str, created_at: str) -> dict[str, Any] | None:
    """A stored league match as a replay record, seen from its best-placed entrant's seat. Seats
    held by a model (``llm:...``) replay as ``wait``: the transcript decides every move, and a
    replay must not load a checkpoint or call an endpoint."""
    if "transcript" not in record:
        return None  # stored before league matches kept their transcripts
    seats = sorted(record["seats"], key=lambda s: (s["entrant"] == DEFAULT_OPPONENTS, -s["surplus"], s["lab"]))
    me = seats[0]
    opponents = {s["lab"]: ("wait" if ":" in s["entrant"] else s["entrant"]) for s in seats[1:]}
    return {"task": record["task"], "split": record["split"], "seed": record["seed"], "seat": me["lab"],
            "judge_mode": "none", "opponents": opponents, "policy": me["entrant"],
            "episode_return": me["episode_return"], "transcript": record["transcript"], "created_at": created_at,
            "ref": ref, "source": "league", "league_index": record["index"],
            "seats": {s["lab"]: s["entrant"] for s in record["seats"]}}


def _read(settings: ServerSettings, fn: Any) -> Any:
    con = open_store_read_only(settings)
    if con is None:
        return None
    try:
        with closing(con):
            return fn(con)
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):  # a store from before these tables: nothing stored
            return None
        # a JSON column SQLite cannot read (changed by hand): said so, never an empty list
        raise StoreError(f"the store's episodes cannot be listed ({e}); was the file changed by hand?") from None


def list_episodes(settings: ServerSettings, *, source: str = "all", task: str | None = None,
                  split: str | None = None, seed: int | None = None, judge_mode: str | None = None,
                  policy: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Stored episodes, newest first, at most ``limit``, filtered by any of the given fields.

    Evaluation episodes are listed only when their replay was kept (without one there is nothing
    to step through).
    """
    def run(con: sqlite3.Connection) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if source in ("all", "served"):
            out += _served(con, task, split, seed, judge_mode, policy, limit)
        if source in ("all", "eval"):
            out += _evaluated(con, task, split, seed, judge_mode, policy, limit)
        if source in ("all", "league") and judge_mode in (None, "none"):
            out += _league(con, task, split, seed, policy, limit)
        out.sort(key=lambda e: e["created_at"], reverse=True)  # stable: an eval run keeps its row order
        return out[:limit]

    return _read(settings, run) or []


def _where(conditions: Sequence[tuple[str, Any]]) -> tuple[str, list[Any]]:
    used = [(sql, v) for sql, v in conditions if v is not None]
    return (" AND ".join(sql for sql, _ in used) or "1"), [v for _, v in used]


def _served(con: sqlite3.Connection, task: str | None, split: str | None, seed: int | None,
            judge_mode: str | None, policy: str | None, limit: int) -> list[dict[str, Any]]:
    where, params = _where([("task = ?", task), ("split = ?", split), ("seed = ?", seed),
                            ("judge_mode = ?", judge_mode), ("json_extract(replay, '$.policy') = ?", policy)])
    # the JSON is read only for the rows listed: the inner query picks them by the indexed columns
    rows = con.execute(
        "SELECT replay_id, created_at, task, split, seed, seat, judge_mode, episode_return, "
        "json_array_length(replay, '$.transcript'), json_extract(replay, '$.policy'), "
        "json_extract(replay, '$.forked_from.ref') FROM served_episodes WHERE rowid IN "
        f"(SELECT rowid FROM served_episodes WHERE {where} ORDER BY created_at DESC, rowid DESC LIMIT ?) "
        "ORDER BY created_at DESC, rowid DESC", (*params, limit)).fetchall()
    return [{"ref": r[0], "source": "served", "created_at": r[1], "task": r[2], "split": r[3], "seed": r[4],
             "seat": r[5], "judge_mode": r[6], "episode_return": r[7], "steps": r[8], "policy": r[9] or "remote",
             "run_id": None, "forked_from": r[10]} for r in rows]


def _evaluated(con: sqlite3.Connection, task: str | None, split: str | None, seed: int | None,
               judge_mode: str | None, policy: str | None, limit: int) -> list[dict[str, Any]]:
    mode = "coalesce(json_extract(replay, '$.judge_mode'), 'none')"
    where, params = _where([("task = ?", task), ("split = ?", split), ("seed = ?", seed), ("policy = ?", policy),
                            (f"{mode} = ?", judge_mode)])
    rows = con.execute(
        "SELECT e.rowid, e.run_id, e.policy, e.task, e.split, e.seed, e.episode_return, r.created_at, "
        "json_array_length(e.replay, '$.transcript'), coalesce(json_extract(e.replay, '$.judge_mode'), 'none'), "
        "coalesce(json_extract(e.replay, '$.seat'), 'lab_0') FROM episodes e JOIN runs r ON r.id = e.run_id "
        f"WHERE e.rowid IN (SELECT rowid FROM episodes WHERE replay IS NOT NULL AND {where} "
        "ORDER BY run_id DESC, rowid LIMIT ?) "
        "ORDER BY e.run_id DESC, e.rowid", (*params, limit)).fetchall()
    return [{"ref": eval_ref(r[1], r[0]), "source": "eval", "run_id": r[1], "policy": r[2], "task": r[3],
             "split": r[4], "seed": r[5], "episode_return": r[6], "created_at": r[7], "steps": r[8],
             "judge_mode": r[9], "seat": r[10], "forked_from": None} for r in rows]


def _league(con: sqlite3.Connection, task: str | None, split: str | None, seed: int | None, policy: str | None,
            limit: int) -> list[dict[str, Any]]:
    try:
        rows = con.execute("SELECT rowid, record, created_at FROM league_matches ORDER BY rowid DESC").fetchall()
    except sqlite3.OperationalError:  # a store from before leagues
        return []
    out: list[dict[str, Any]] = []
    for rowid, text, created_at in rows:
        record = stored_json(text, f"league match league-{rowid}")
        replay = league_replay(record, f"league-{rowid}", created_at)
        if replay is None or (task and replay["task"] != task) or (split and replay["split"] != split) \
                or (seed is not None and replay["seed"] != seed) or (policy and policy not in replay["seats"].values()):
            continue
        out.append({k: replay[k] for k in ("ref", "source", "task", "split", "seed", "seat", "judge_mode",
                                           "episode_return", "policy", "created_at", "league_index")}
                   | {"steps": len(replay["transcript"]), "run_id": None, "forked_from": None})
        if len(out) >= limit:
            break
    return out


__all__ = ["EPISODE_REF_PATTERN", "eval_ref", "list_episodes", "load_episode"]


def open_store_read_only(settings: ServerSettings) -> sqlite3.Connection | None:
    """The store opened read-only (None when there is none), so that reading it from the dashboard
    never creates or migrates a database."""
    path = db_path(settings.db)
    if not path.is_file():
        return None
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
