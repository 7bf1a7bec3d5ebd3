"""REST sessions: one :class:`ServedArenaEnv` per session id, a cap, idle expiry, tombstones."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .environment import ServedArenaEnv
from .errors import CapacityReached, SessionGone, SessionNotFound
from .settings import ServerSettings

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class Session:
    session_id: str
    env: ServedArenaEnv
    created_at: float
    last_activity: float


class SessionManager:
    """The open REST sessions of one server.

    Contract:

    * ``create`` opens a session or raises :class:`CapacityReached` once ``max_sessions`` are open
      (live matches count too: ``others``).
    * ``run(session_id, fn)`` calls ``fn(env)``; an unknown id raises :class:`SessionNotFound`, a
      closed or expired one :class:`SessionGone` (410) naming which.
    * A session idle (no request) for ``idle_timeout_s`` is expired: by the reaper's sweep or,
      whichever comes first, by the next request that names it. Its environment is closed, so
      even a reference held elsewhere cannot step it again.
    * Closed and expired ids are remembered (``tombstones`` of them) so they answer 410, not 404.

    Everything runs on the server's event loop, ``fn`` included: a step is about a millisecond of
    GIL-bound Python that threads could not run in parallel, and a call that never awaits cannot
    be cancelled halfway by a client that hangs up, so a step is applied whole or not at all.
    """

    def __init__(self, settings: ServerSettings, env_factory: Callable[[], ServedArenaEnv],
                 clock: Callable[[], float] = time.monotonic, others: Callable[[], int] = lambda: 0) -> None:
        self.settings = settings
        self.others = others  # live matches: they share the cap (set by the app)
        self._factory = env_factory
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._gone: OrderedDict[str, str] = OrderedDict()
        self._reaper: asyncio.Task[None] | None = None

    @property
    def active(self) -> int:
        return len(self._sessions)

    def create(self) -> Session:
        self.expire_idle()
        if len(self._sessions) + self.others() >= self.settings.max_sessions:
            raise CapacityReached(
                f"{len(self._sessions)} REST sessions and {self.others()} matches of {self.settings.max_sessions} are open; "
                "close one (DELETE /api/sessions/{id}) or retry later",
                extra={"active_sessions": len(self._sessions), "max_sessions": self.settings.max_sessions})
        now = self._clock()
        session = Session(secrets.token_urlsafe(16), self._factory(), now, now)
        self._sessions[session.session_id] = session
        return session

    async def run(self, session_id: str, fn: Callable[[ServedArenaEnv], T]) -> T:
        session = self._lookup(session_id)
        try:
            return fn(session.env)
        finally:
            session.last_activity = self._clock()

    async def close(self, session_id: str, reason: str = "session_closed") -> None:
        session = self._lookup(session_id)
        session.env.close()
        self._bury(session_id, reason)

    def expire_idle(self) -> list[str]:
        cutoff = self._clock() - self.settings.idle_timeout_s
        stale = [s.session_id for s in self._sessions.values() if s.last_activity < cutoff]
        for sid in stale:
            self._sessions[sid].env.close()
            self._bury(sid, "session_expired")
        return stale

    def _lookup(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            reason = self._gone.get(session_id)
            if reason is None:
                raise SessionNotFound(f"no session {session_id[:64]!r}")
            what = "closed" if reason == "session_closed" else f"expired after {self.settings.idle_timeout_s:g} s idle"
            raise SessionGone(f"session {session_id[:64]!r} was {what}", code=reason)
        if session.last_activity < self._clock() - self.settings.idle_timeout_s:
            session.env.close()
            self._bury(session_id, "session_expired")
            raise SessionGone(f"session {session_id[:64]!r} expired after {self.settings.idle_timeout_s:g} s idle",
                              code="session_expired")
        return session

    def _bury(self, session_id: str, reason: str) -> None:
        self._sessions.pop(session_id, None)
        self._gone[session_id] = reason
        self._gone.move_to_end(session_id)
        while len(self._gone) > self.settings.tombstones:
            self._gone.popitem(last=False)

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.reaper_interval_s)
            self.expire_idle()

    def start(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        for s in self._sessions.values():
            s.env.close()
        self._sessions.clear()
