"""The arena's app: the session server (:mod:`gpu_arena.server.app`) with the dashboard mounted on
it, and how it is run.

The dashboard depends on the server, never the other way: :func:`mount_dashboard` is a server
extension (``create_server_app(extensions=...)``) that adds the replay and fork routes, the
Reference section, the overview, results and training routes, the page at ``/`` and the first-run
evaluation to the server's app. :func:`create_arena_app` builds the whole arena; ``app`` is the
one built from the ``GPU_ARENA_*`` variables.

Run it with ``gpu-arena serve`` (or ``make run``), ``python -m gpu_arena.dashboard.app`` (the
``server`` script, OpenEnv's launcher convention), or ``uvicorn gpu_arena.dashboard.app:app``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from fastapi import FastAPI

from ..server.app import ServerParts, create_server_app, run_app
from ..server.settings import ServerSettings
from .autoeval import AutoEval
from .reference import build_reference_router
from .replays import build_replay_router
from .routes import install_dashboard


def mount_dashboard(app: FastAPI, parts: ServerParts) -> None:
    """Add the dashboard to the server's ``app``: its routes, the page at ``/`` and the first-run
    evaluation (``settings.auto_eval``), started after the server's sessions and stopped before
    them, never waited for."""
    settings = parts.settings
    app.openapi_tags = [*(app.openapi_tags or []), {"name": "Dashboard", "description": "what the page at / reads"}]
    app.include_router(build_replay_router(settings, parts.sessions, parts.recorder))
    app.include_router(build_reference_router(settings))
    auto_eval = AutoEval(settings)
    app.state.auto_eval = auto_eval
    install_dashboard(app, settings, auto_eval)

    async def start() -> None:
        auto_eval.start()

    async def stop() -> None:
        auto_eval.stop()

    app.router.on_startup.append(start)
    app.router.on_shutdown.insert(0, stop)


def create_arena_app(settings: ServerSettings | None = None) -> FastAPI:
    """The arena's app: the server with the dashboard. ``settings`` default to
    :meth:`ServerSettings.from_env`."""
    return create_server_app(settings, extensions=(mount_dashboard,))


app = create_arena_app()


def serve(settings: ServerSettings, *, log_level: str = "info") -> None:
    """Run the arena's app for ``settings`` under uvicorn on ``settings.host:settings.port`` until
    interrupted."""
    run_app(app if settings == app.state.settings else create_arena_app(settings), settings, log_level=log_level)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m gpu_arena.dashboard.app [--host H] [--port P]`` (the OpenEnv launcher convention)."""
    parser = argparse.ArgumentParser(description="GPU Arena OpenEnv server")
    parser.add_argument("--host", default=None, help="default $GPU_ARENA_HOST or 127.0.0.1")
    parser.add_argument("--port", type=int, default=None, help="default $GPU_ARENA_PORT or 8000")
    args = parser.parse_args(argv)
    serve(ServerSettings.from_env(host=args.host, port=args.port))


if __name__ == "__main__":
    main()


__all__ = ["app", "create_arena_app", "main", "mount_dashboard", "serve"]
