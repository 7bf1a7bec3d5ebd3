"""The dashboard in a real headless Chromium (the system's ``chromium``, driven by Playwright) against a
real uvicorn whose store holds a real evaluation run.

Skipped only where no Chromium binary is installed (``make test`` installs Debian's ``chromium``).
Screenshots go to ``$GPU_ARENA_TEST_ARTIFACTS`` (default ``test-artifacts/``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard_helpers import store_eval_run
from server_helpers import running_server, settings_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (make test installs Debian's chromium)")
ARTIFACTS = Path(os.environ.get("GPU_ARENA_TEST_ARTIFACTS", "test-artifacts"))
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("dash")
    store_eval_run(tmp / "arena.db", "holdout")
    with running_server(settings_for(tmp)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    # Playwright's own browser download is not needed (nor reachable in CI): launch the system's Chromium
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any, base_url: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    p = context.new_page()
    p.set_default_timeout(TIMEOUT_MS)
    problems: list[str] = []
    p.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    p.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    p.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    p.problems = problems
    p.goto(base_url + "/")
    p.wait_for_selector("body[data-ready=true]")
    yield p
    context.close()


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_page_loads_without_console_errors(page: Any, base_url: str) -> None:
    overview = httpx.get(base_url + "/api/overview").json()
    assert page.locator("#glance-actions li").count() == len(overview["action_types"])
    assert page.locator("#glance-tasks tbody tr").count() == len(overview["tasks"])
    assert f"#{overview['latest_eval']['id']}" in page.locator("#glance-eval").inner_text()
    assert page.locator("#version").inner_text() == overview["version"]
    # no value the page failed to fill: JavaScript's null/undefined/NaN never reach the reader
    words = set(page.locator("main").inner_text().replace(",", " ").split())
    assert not words & {"null", "undefined", "NaN"}
    shot(page, "dashboard")
    assert page.problems == []


def test_live_arena_plays_an_episode_to_the_end(page: Any, base_url: str) -> None:
    page.select_option("#arena-task", "market_round")
    page.select_option("#arena-split", "train")
    page.fill("#arena-seed", "3")
    page.select_option("#arena-policy", "rule_expert")
    page.click("#arena-new")
    page.wait_for_selector("#arena-play:not([disabled])")
    page.click("#arena-step")  # one round by hand, then the rest
    page.wait_for_selector("#arena-steps tbody tr")
    page.wait_for_selector("#arena-play:not([disabled])")
    page.click("#arena-play")
    replay = page.wait_for_selector("#arena-replay")
    replay_id = replay.get_attribute("data-replay-id")
    record = httpx.get(f"{base_url}/api/episodes/{replay_id}").json()
    shown = float(page.get_attribute("#arena-cumulative", "data-value"))
    assert shown == pytest.approx(record["episode_return"], abs=1e-12)
    assert float(page.inner_text("#arena-cumulative")) == pytest.approx(record["episode_return"], abs=5e-5)
    assert page.locator("#arena-steps tbody tr").count() == len(record["transcript"])
    assert (record["task"], record["split"], record["seed"]) == ("market_round", "train", 3)
    assert page.locator("#arena-breakdown rect").count() == 11  # every reward column has its bar
    assert page.is_disabled("#arena-step") and page.is_disabled("#arena-play")
    shot(page, "live-arena")
    assert page.problems == []


def test_results_show_the_stored_run(page: Any, base_url: str) -> None:
    api = httpx.get(base_url + "/api/results/latest?split=holdout").json()
    rows = page.locator("#results-table tbody tr")
    assert rows.count() == len(api["rows"]) == 4
    for i, r in enumerate(api["rows"]):
        row = rows.nth(i)
        assert (row.get_attribute("data-task"), row.get_attribute("data-policy")) == (r["task"], r["policy"])
        assert float(row.locator("td.mean").inner_text()) == pytest.approx(r["mean"], abs=5e-5)
    assert page.locator("#results-chart g[data-policy]").count() == 4
    assert page.locator("#results-chart circle").count() == 4
    shot(page, "results")
    page.click("#results button[data-split=train]")
    page.wait_for_selector("#results-empty:not([hidden])")
    assert page.inner_text("#results-command").startswith("gpu-arena eval --split train")
    page.click("#results button[data-split=holdout]")
    page.wait_for_selector("#results-body:not([hidden])")
    assert page.problems == []


def test_phone_width_has_no_sideways_scroll(page: Any) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.click("#arena-new")
    page.wait_for_selector("#arena-step:not([disabled])")
    page.click("#arena-step")
    page.wait_for_selector("#arena-steps tbody tr")
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0
    shot(page, "phone")
    assert page.problems == []
