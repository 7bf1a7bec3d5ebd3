"""``gpu-arena serve``: the arena's server (``make run``)."""

from __future__ import annotations

import typer

from .console import console

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's


def serve(
    host: str | None = typer.Option(None, help="interface to bind (default $GPU_ARENA_HOST or 127.0.0.1)"),
    port: int | None = typer.Option(None, min=0, max=65535, help="port (default $GPU_ARENA_PORT or 8000)"),
    max_sessions: int | None = typer.Option(None, min=1, help="concurrent sessions per API (default 64)"),
    db: str | None = typer.Option(None, help="SQLite store for finished episodes (default .arena/arena.db)"),
    log_level: str = typer.Option("info", help=f"uvicorn log level: {' | '.join(LOG_LEVELS)}"),
    judge: str | None = typer.Option(None, help="model judge for sessions in judge mode: "
                                                "llm:openai:<model>@<base_url> (default $GPU_ARENA_JUDGE or rule)"),
    auto_eval: bool | None = typer.Option(None, "--auto-eval/--no-auto-eval",
                                          help="when the store holds no evaluation run, fill it with a quick one in "
                                               "the background (default on; $GPU_ARENA_AUTO_EVAL=0 turns it off)"),
) -> None:
    """Serve the arena: OpenEnv WebSocket sessions at /ws, REST sessions at /api, docs at /docs."""
    import os

    from ..server.settings import ServerSettings

    if log_level.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"--log-level must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    try:
        settings = ServerSettings.from_env(host=host, port=port, max_sessions=max_sessions, db=db, judge=judge,
                                           auto_eval=auto_eval)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    if auto_eval is None and "GPU_ARENA_AUTO_EVAL" not in os.environ:
        settings = settings.with_(auto_eval=True)  # the first `make run` shows real numbers (off in the library)
    from ..dashboard.app import serve as run_server

    console.print(f"GPU Arena on http://{settings.host}:{settings.port} (docs at /docs, WebSocket at /ws); "
                  f"up to {settings.max_sessions} sessions, idle timeout {settings.idle_timeout_s:g} s")
    if settings.auto_eval:
        console.print("if the store holds no evaluation run, a quick one fills it in the background "
                      "(the dashboard shows its progress; --no-auto-eval skips it)")
    run_server(settings, log_level=log_level.lower())

