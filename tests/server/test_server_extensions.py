"""The server knows nothing of the dashboard: it serves without it, and the dashboard mounts itself
on the server's app as an extension (``create_server_app(extensions=...)``)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from gpu_arena.dashboard.app import create_arena_app, mount_dashboard
from gpu_arena.server.app import ServerParts, create_server_app
from server_helpers import settings_for


def _paths(app: FastAPI) -> set[str]:
    return set(app.openapi()["paths"])


def test_the_server_serves_without_the_dashboard(tmp_path: Path) -> None:
    bare = create_server_app(settings_for(tmp_path))
    paths = _paths(bare)
    assert {"/reset", "/step", "/api/sessions", "/api/matches"} <= paths
    assert "/api/overview" not in paths and "/api/episodes/{ref}/frames" not in paths
    assert not hasattr(bare.state, "auto_eval")
    with TestClient(bare) as c:
        assert c.get("/health").status_code == 200
        opened = c.post("/api/sessions", json={"task": "single_trade", "seed": 1})
        assert opened.status_code == 201, opened.text
        assert c.get("/api/overview").status_code == 404  # no dashboard: the structured 404
        assert c.get("/api/overview").json()["error"]["code"] == "http_404"


def test_an_extension_gets_the_servers_parts_and_runs_after_it(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    seen: list[ServerParts] = []
    events: list[str] = []

    def extend(app: FastAPI, parts: ServerParts) -> None:
        seen.append(parts)

        async def start() -> None:
            events.append("started with sessions" if parts.sessions._reaper is not None else "started first")

        app.router.on_startup.append(start)

    app = create_server_app(settings, extensions=[extend])
    assert seen[0].settings is settings and seen[0].sessions is app.state.sessions
    assert seen[0].matches is app.state.matches and seen[0].recorder is app.state.recorder
    with TestClient(app):
        pass
    assert events == ["started with sessions"]


def test_the_arena_app_is_the_server_with_the_dashboard_mounted(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, auto_eval=False)
    arena = create_arena_app(settings)
    by_hand = create_server_app(settings, extensions=[mount_dashboard])
    assert arena.openapi() == by_hand.openapi()
    assert {"/api/overview", "/api/episodes/{ref}/frames"} <= _paths(arena)
    assert arena.openapi_tags[-1]["name"] == "Dashboard"
    with TestClient(arena) as c:
        assert c.get("/api/overview").status_code == 200
        assert "text/html" in c.get("/").headers["content-type"]
