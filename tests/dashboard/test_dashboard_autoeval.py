"""The first-run evaluation: off by default (library, tests), on for ``gpu-arena serve``; with an
empty store it fills it in the background with a real ``gpu-arena eval`` (subprocess), never
blocking start-up; it skips a store that has a run, reports bad settings, and stops with the server
or at its time limit."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dashboard_helpers import store_eval_run
from gpu_arena.dashboard.app import create_arena_app
from gpu_arena.evaluation.store import connect, latest_run
from gpu_arena.server.settings import ServerSettings
from server_helpers import running_server, settings_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(os.environ.get("GPU_ARENA_TEST_ARTIFACTS", "test-artifacts"))

TINY = {"auto_eval": True, "auto_eval_policies": "no_negotiation,rule_expert", "auto_eval_tasks": "single_trade",
        "auto_eval_splits": "holdout", "auto_eval_seeds": 2}


def _wait(client: TestClient, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get("/api/auto-eval").json()
        if status["state"] != "running":
            return status
        time.sleep(0.25)
    raise AssertionError("the first-run evaluation did not finish")


def test_off_unless_turned_on(tmp_path: Path) -> None:
    with TestClient(create_arena_app(settings_for(tmp_path))) as c:
        assert c.get("/api/auto-eval").json()["state"] == "off"
        assert c.get("/api/overview").json()["auto_eval"]["state"] == "off"
    assert not (tmp_path / "arena.db").exists()


def test_an_empty_store_is_filled_in_the_background(tmp_path: Path) -> None:
    """One evaluation subprocess serves both checks: the API's, and (where Chromium is installed)
    the page's banner while it runs and its Results filling in without a reload."""
    t0 = time.monotonic()
    with running_server(settings_for(tmp_path, **TINY)) as url:
        assert time.monotonic() - t0 < 10  # start-up did not wait for the evaluation
        first = httpx.get(url + "/api/auto-eval").json()
        assert first["state"] == "running" and first["episodes"] == 4
        assert httpx.get(url + "/api/overview").json()["auto_eval"]["state"] == "running"
        if CHROMIUM is not None:
            _watch_the_page(url)
        deadline = time.monotonic() + 180
        while (done := httpx.get(url + "/api/auto-eval").json())["state"] == "running":
            assert time.monotonic() < deadline, "the first-run evaluation did not finish"
            time.sleep(0.25)
        assert done["state"] == "done" and done["completed_splits"] == ["holdout"], done
        res = httpx.get(url + "/api/results/latest?split=holdout").json()
        assert {(r["task"], r["policy"], r["n"]) for r in res["rows"]} == {
            ("single_trade", "no_negotiation", 2), ("single_trade", "rule_expert", 2)}
        assert res["run"]["id"] == httpx.get(url + "/api/overview").json()["latest_eval"]["id"]
        # its replays were kept, so the Replays section can step through them
        assert len(httpx.get(url + "/api/episodes?source=eval").json()["episodes"]) == 4
    con = connect(tmp_path / "arena.db")
    run = latest_run(con)
    con.close()
    assert run is not None and run["args"]["policies"] == ["no_negotiation", "rule_expert"] and run["seeds"] == [0, 1]


def _watch_the_page(url: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url + "/")
            page.wait_for_selector("body[data-ready=true]", timeout=30_000)
            if httpx.get(url + "/api/auto-eval").json()["state"] == "running":
                assert "evaluation is in progress" in page.inner_text("#autoeval-status")
                assert page.is_visible("#results-autoeval") and page.is_visible("#results-empty")
            # the numbers arrive without a reload
            page.wait_for_selector("#results-body:not([hidden])", timeout=180_000)
            rows = httpx.get(url + "/api/results/latest?split=holdout").json()["rows"]
            assert page.locator("#results-table tbody tr").count() == len(rows) == 2
            page.wait_for_selector("#autoeval-status[data-state=done]", timeout=30_000)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "first-run-evaluation.png"), full_page=False)
            assert errors == []
        finally:
            browser.close()


def test_a_store_with_a_run_is_left_alone(tmp_path: Path) -> None:
    run_id = store_eval_run(tmp_path / "arena.db", "holdout")
    with TestClient(create_arena_app(settings_for(tmp_path, **TINY))) as c:
        status = c.get("/api/auto-eval").json()
    assert status["state"] == "skipped" and f"#{run_id}" in status["message"]
    assert not (tmp_path / "auto-eval").exists()


@pytest.mark.parametrize(("change", "words"), [({"auto_eval_policies": "no_such_policy"}, "unknown policy"),
                                               ({"auto_eval_tasks": "chess"}, "unknown task"),
                                               ({"auto_eval_splits": "test"}, "unknown split")])
def test_bad_settings_fail_visibly_without_starting(tmp_path: Path, change: dict[str, str], words: str) -> None:
    with TestClient(create_arena_app(settings_for(tmp_path, **{**TINY, **change}))) as c:
        status = c.get("/api/auto-eval").json()
    assert status["state"] == "failed" and words in status["message"] and status["started_at"] is None


def test_it_stops_at_its_time_limit_and_with_the_server(tmp_path: Path) -> None:
    slow = {**TINY, "auto_eval_seeds": 500, "auto_eval_tasks": "coalition_market"}
    with TestClient(create_arena_app(settings_for(tmp_path / "a", **slow, auto_eval_timeout_s=1.0))) as c:
        status = _wait(c, 60)
    assert status["state"] == "failed" and "stopped after 1 s" in status["message"]
    app = create_arena_app(settings_for(tmp_path / "b", **slow))
    with TestClient(app) as c:
        assert c.get("/api/auto-eval").json()["state"] == "running"
    status = app.state.auto_eval.status()  # the server stopped: so did its evaluation
    assert status["state"] == "failed" and "stopped with the server" in status["message"]


def test_gpu_arena_serve_turns_it_on_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpu_arena.dashboard.app as arena_app
    from gpu_arena.cli import app

    seen: list[ServerSettings] = []
    monkeypatch.setattr(arena_app, "serve", lambda settings, log_level="info": seen.append(settings))
    monkeypatch.delenv("GPU_ARENA_AUTO_EVAL", raising=False)
    runner = CliRunner()
    assert runner.invoke(app, ["serve"]).exit_code == 0
    assert runner.invoke(app, ["serve", "--no-auto-eval"]).exit_code == 0
    monkeypatch.setenv("GPU_ARENA_AUTO_EVAL", "0")
    assert runner.invoke(app, ["serve"]).exit_code == 0
    assert runner.invoke(app, ["serve", "--auto-eval"]).exit_code == 0
    assert [s.auto_eval for s in seen] == [True, False, False, True]
