"""Thread-safe writes of finished episodes to the embedded SQLite store."""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import Any

log = logging.getLogger("gpu_arena.server")


class EpisodeRecorder:
    """One SQLite connection shared by every session of a server, behind a lock.

    Sessions step in worker threads, so the connection is opened with ``check_same_thread=False``
    and every use holds the lock. It is opened on first use (importing the app creates no file)
    in WAL mode, so that readers (``GET /api/episodes/{id}``, ``gpu-arena report``) never wait
    for a writer.
    """

    def __init__(self, path: str | None = None) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._con: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            # imported here: the evaluation package (runner, store) is start-up the server
            # does not need until the first episode ends
            from ..evaluation.store import connect, db_path

            con = connect(self._path)
            con.close()  # connect() creates the schema; reopen shareable across worker threads
            self._con = sqlite3.connect(db_path(self._path), check_same_thread=False)
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute("PRAGMA synchronous=NORMAL")
        return self._con

    def save(self, record: dict[str, Any]) -> None:
        from ..evaluation.store import save_served_episode

        with self._lock:
            if not save_served_episode(self._connection(), record):
                log.warning("episode %s not stored: its record holds what standard JSON cannot carry",
                            record.get("replay_id"))

    def load(self, replay_id: str) -> dict[str, Any] | None:
        from ..evaluation.store import load_served_episode

        with self._lock:
            return load_served_episode(self._connection(), replay_id)

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
