"""The GPU Arena server: OpenEnv's app (``/ws``, ``/reset``, ``/step``, ``/state``, ``/schema``,
``/metadata``, ``/health``, ``/mcp``, the task API under ``/gpu_arena/``) plus REST sessions and live
matches under ``/api``, built by :func:`create_server_app`.

What else is served on the same app mounts itself through ``extensions``: each is called with the
app and the server's parts (:class:`ServerParts`) once the server's own routes are in. The dashboard
is one (``gpu_arena.dashboard.app`` builds the arena's app, the server with the dashboard, and runs
it: ``gpu-arena serve``, ``make run``); the server never imports it. Settings come from
``GPU_ARENA_*`` variables (:class:`~gpu_arena.server.settings.ServerSettings`). One process only:
sessions live in its memory.
"""

from __future__ import annotations

import functools
import gc
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.types import ConcurrencyConfig
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from .._lean_openenv import allow_web_interface_if_wanted
from ..evaluation.store import StoreError
from ..models import ArenaAction, ArenaObservation, ArenaState
from .environment import ServedArenaEnv
from .errors import ArenaRequestError, CapacityReached, error_response
from .guard import PayloadGuard
from .match_routes import build_match_router
from .matches import MatchManager
from .recorder import EpisodeRecorder
from .routes import build_router
from .sessions import SessionManager
from .settings import ServerSettings

ENV_NAME = "gpu_arena"
log = logging.getLogger("gpu_arena.server")

DESCRIPTION = """
A multi-agent GPU-market negotiation environment, served the OpenEnv way.

* **WebSocket** `/ws`: one isolated episode per connection (OpenEnv's `EnvClient`, or
  `gpu_arena.client.GpuArenaClient`): `{"type": "reset", "data": {...}}`, `{"type": "step", "data": action}`,
  `{"type": "state"}`, `{"type": "close"}`.
* **REST sessions** `/api/sessions`: the same episodes over plain HTTP, with a session id.
* **Live matches** `/api/matches`: one episode whose seats several clients hold at once (a bearer
  token per remote seat), the other seats played by server-side policies.
* `/reset` and `/step` are OpenEnv's stateless routes: each call uses a fresh environment.
* Finished episodes are stored and replayable: `/api/episodes/{replay_id}`.
* Stored episodes (served, and evaluation episodes with replays) are listed at `/api/episodes`, replayed
  step by step at `/api/episodes/{ref}/frames` and forked into a new session with
  `POST /api/episodes/{ref}/fork?step=k`.
* The dashboard is at `/`; it reads `/api/overview`, `/api/results/latest`, `/api/reference/*`,
  `/api/artifacts`, the episode routes and the session routes.

Every bad input is a 4xx with `{"error": {"code", "message"}}`, or, for a well-typed action the
rules refuse, an observation whose `last_action_result` carries the code. Never a 5xx.
"""


@dataclass(frozen=True, slots=True)
class ServerParts:
    """What an extension mounting itself on the server's app may use: the settings, the REST
    sessions, the live matches and the replay store (None when episodes are not stored)."""

    settings: ServerSettings
    sessions: SessionManager
    matches: MatchManager
    recorder: EpisodeRecorder | None


# an extension adds its routes (and start-up or shut-down hooks) to the server's app
ServerExtension = Callable[[FastAPI, ServerParts], None]


def create_server_app(settings: ServerSettings | None = None, *,
                      extensions: Sequence[ServerExtension] = ()) -> FastAPI:
    """Build the server's app, then let each of ``extensions`` mount itself on it. ``settings``
    default to :meth:`ServerSettings.from_env`. The server starts its sessions and matches first
    and stops them last: an extension's start-up hooks run after the server's, its shut-down
    hooks (put first) before."""
    settings = settings or ServerSettings.from_env()
    recorder = EpisodeRecorder(settings.db) if settings.store_episodes else None
    # a partial of the class, so that OpenEnv reads SUPPORTS_CONCURRENT_SESSIONS without building one
    factory = functools.partial(ServedArenaEnv, settings, recorder)
    allow_web_interface_if_wanted()  # OpenEnv's own Gradio UI, if its switch is on now (decision 0019)
    app = create_app(
        factory, ArenaAction, ArenaObservation, env_name=ENV_NAME, state_cls=ArenaState,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=settings.max_sessions,
                                             session_timeout=settings.idle_timeout_s),
    )
    # info.version stays OpenEnv's HTTP API version (1.x): `openenv validate` reads it as the standard
    app.title = f"GPU Arena {__version__}"
    app.description = DESCRIPTION
    app.openapi_tags = [*(app.openapi_tags or []),
                        {"name": "Sessions (REST)", "description": "stateful episodes over plain HTTP"},
                        {"name": "Episodes", "description": "replays of finished episodes"},
                        {"name": "Matches", "description": "live matches: seats of one episode held by several "
                                                           "clients and server-side policies"}]

    manager = SessionManager(settings, lambda: ServedArenaEnv(settings, recorder))
    matches = MatchManager(settings, recorder, others=lambda: manager.active)
    manager.others = lambda: matches.active  # REST sessions and matches share the cap
    app.state.settings, app.state.sessions, app.state.recorder = settings, manager, recorder
    app.state.matches = matches
    app.include_router(build_router(manager, recorder))
    app.include_router(build_match_router(matches))

    async def start() -> None:
        manager.start()
        matches.start()

    async def stop() -> None:
        await manager.stop()
        await matches.stop()
        if recorder is not None:
            recorder.close()

    app.router.on_startup.append(start)
    app.router.on_shutdown.append(stop)

    parts = ServerParts(settings, manager, matches, recorder)
    for extend in extensions:
        extend(app, parts)

    _install_error_handlers(app)
    app.add_middleware(PayloadGuard, max_bytes=settings.max_body_bytes, max_depth=settings.max_json_depth)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    async def arena_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ArenaRequestError)
        headers = {"Retry-After": "1"} if isinstance(exc, CapacityReached) else None
        return error_response(exc.status, exc.code, exc.message, headers=headers, **exc.extra)

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        return error_response(422, "invalid_request", f"{where}: {first.get('msg', 'invalid')}",
                              detail=jsonable_encoder(errors, custom_encoder={bytes: lambda b: b.decode("latin-1")}))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        # OpenEnv's own routes raise HTTPException; keep their "detail" and add the structured error
        assert isinstance(exc, StarletteHTTPException)
        detail: Any = exc.detail
        return error_response(exc.status_code, f"http_{exc.status_code}", str(detail), detail=detail,
                              headers=getattr(exc, "headers", None))

    async def store_error(request: Request, exc: Exception) -> JSONResponse:
        # a row changed outside the project: said as such, in the error envelope (not a bare 500)
        return error_response(503, "store_unreadable", str(exc))

    app.add_exception_handler(StoreError, store_error)
    app.add_exception_handler(ArenaRequestError, arena_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)


def uvicorn_options(settings: ServerSettings) -> dict[str, Any]:
    """The uvicorn options that belong to the settings (everything but the app, host and port)."""
    return {
        # frames above the guard's limit still get its structured error; only frames four times
        # larger are cut by the protocol itself (close code 1009)
        "ws_max_size": 4 * settings.max_body_bytes,
        # per-message deflate costs more CPU per step than the step's own bookkeeping; observations
        # are a few kB, so it is off unless asked for (a slow link: GPU_ARENA_WS_COMPRESSION=1)
        "ws_per_message_deflate": settings.ws_compression,
    }


def run_app(app: FastAPI, settings: ServerSettings, *, log_level: str = "info") -> None:
    """Run ``app`` (built for ``settings``) under uvicorn on ``settings.host:settings.port`` until
    interrupted."""
    import uvicorn

    if settings.gc_freeze:
        # what is imported and built by now lives as long as the process: out of the collector's
        # generations, it is not traversed again by every full collection, which pauses all sessions
        # (64 coalition_market clients: p99 about 120 ms instead of 180-260; decision 0008)
        gc.collect()
        gc.freeze()
    try:
        uvicorn.run(app, host=settings.host, port=settings.port, log_level=log_level, **uvicorn_options(settings))
    finally:
        if settings.gc_freeze:
            gc.unfreeze()  # a caller that embeds run_app() gets its collector back as it was


__all__ = ["ServerExtension", "ServerParts", "create_server_app", "run_app", "uvicorn_options"]
