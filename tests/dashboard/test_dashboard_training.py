"""The dashboard's pipeline views against a store holding a real ``gpu-arena train pipeline`` run (tiny
preset, made once per session by :func:`dashboard_helpers.pipeline_store`): the Training section's
routes for pipeline and expert-iteration runs, Before vs after (``/api/training/pipelines/...``), the
glance's evidence row, and the same in a headless Chromium.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from dashboard_helpers import PIPELINE_TASK, pipeline_store, watched
from gpu_arena.dashboard.app import create_arena_app
from gpu_arena.evaluation.store import load_replay, load_returns
from gpu_arena.training.runlog import connect as connect_runs
from gpu_arena.training.runlog import finish_run, list_training_runs, log_metrics, start_run
from server_helpers import running_server, settings_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TIMEOUT_MS = 20_000
ARTIFACTS = Path(os.environ.get("GPU_ARENA_TEST_ARTIFACTS", "test-artifacts"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("trl")  # the pipeline trains: the `train` extra
    return pipeline_store(tmp_path_factory)


@pytest.fixture(scope="module")
def client(store: Path) -> Iterator[TestClient]:
    with TestClient(create_arena_app(settings_for(store))) as c:
        yield c


@pytest.fixture(scope="module")
def stored(store: Path) -> dict[str, Any]:
    """What the pipeline wrote, read straight from the store: its run, evidence and episode returns."""
    with closing(sqlite3.connect(store / "arena.db")) as con:
        runs = list_training_runs(con, kind="pipeline")
        assert len(runs) == 1 and runs[0]["status"] == "finished", runs
        evidence = runs[0]["summary"]["evidence"]
        returns = load_returns(con, evidence["runs"]["eval"])
    return {"run": runs[0], "evidence": evidence, "returns": returns}


def _get(client: TestClient, path: str, status: int = 200) -> Any:
    r = client.get(path)
    assert r.status_code == status, (path, r.text)
    return r.json()


def _gaps(stored: dict[str, Any], task: str) -> dict[int, tuple[float, float]]:
    """(SFT return, trained return) by holdout seed, from the stored episodes."""
    policies = stored["evidence"]["policies"]
    by = {(p, s): ret for p, t, sp, s, ret in stored["returns"] if t == task and sp == "holdout"}
    seeds = sorted({s for _, s in by})
    return {s: (by[policies["sft"], s], by[policies["trained"], s]) for s in seeds}


def test_latest_pipeline_links_its_stage_runs_and_evidence(client: TestClient, stored: dict[str, Any]) -> None:
    ev, run = stored["evidence"], stored["run"]
    latest = _get(client, "/api/training/pipelines/latest")
    assert latest == _get(client, f"/api/training/pipelines/{run['id']}")
    assert latest["run"]["id"] == run["id"] and latest["run"]["kind"] == "pipeline"
    assert latest["evidence"] == ev and latest["command"] == ev["command"]
    assert latest["stage_runs"] == {"sft": ev["runs"]["sft"], "rl": ev["runs"]["rl"], "eval": ev["runs"]["eval"]}
    assert [s for s in latest["stages"]] == ["data", "sft", "rl", "eval"]
    assert all(latest["stages"][s]["status"] == "finished" for s in latest["stages"])
    # the stage runs are the store's own: SFT, then expert iteration (the tiny preset's RL), then an eval run
    sft = _get(client, f"/api/training/runs/{latest['stage_runs']['sft']}")
    rl = _get(client, f"/api/training/runs/{latest['stage_runs']['rl']}")
    assert (sft["kind"], rl["kind"]) == ("sft", ev["rl_method"]) == ("sft", "rft")
    assert len(sft["series"]["loss"]["value"]) >= 2
    for name in ("reward", "greedy_reward", "arena/valid_action_rate"):
        assert rl["series"][name]["step"] == [1], name
    episodes = _get(client, f"/api/episodes?source=eval&task={PIPELINE_TASK}&limit=500")["episodes"]
    assert {e["run_id"] for e in episodes} == {latest["stage_runs"]["eval"]}
    # the headline: trained − SFT and trained − no_negotiation on the training task, as the evidence has them
    rows = {r["comparison"]: r for r in latest["headline"]["rows"]}
    assert list(rows) == ["trained-vs-sft", "trained-vs-no_negotiation"]
    for name, row in rows.items():
        (want,) = [c for c in ev["comparisons"] if c["comparison"] == name and c["task"] == PIPELINE_TASK]
        assert {k: row[k] for k in want} == want
    assert rows["trained-vs-sft"]["label"] == "trained − start (SFT)"
    gaps = _gaps(stored, PIPELINE_TASK)
    mean_gap = sum(t - s for s, t in gaps.values()) / len(gaps)
    assert rows["trained-vs-sft"]["mean_diff"] == pytest.approx(mean_gap, abs=1e-12)
    assert rows["trained-vs-sft"]["n"] == len(gaps) == 3


def test_overview_and_run_list_know_pipelines_and_expert_iteration(client: TestClient, stored: dict[str, Any],
                                                                    store: Path) -> None:
    training = _get(client, "/api/overview")["training"]
    latest = _get(client, "/api/training/pipelines/latest")
    assert training["pipeline"] == latest["headline"] and training["pipeline"]["command"] == stored["evidence"]["command"]
    assert training["pipeline_command"] == f"gpu-arena train pipeline --preset tiny --output runs/pipeline --db {store / 'arena.db'}"
    assert training["latest"]["rft"]["id"] == latest["stage_runs"]["rl"] and training["latest"]["grpo"] is None
    assert "gpu-arena train pipeline --help" in training["commands"]
    by_kind = {k: [r["id"] for r in _get(client, f"/api/training/runs?kind={k}")["runs"]] for k in ("sft", "rft", "pipeline")}
    assert by_kind == {"sft": [latest["stage_runs"]["sft"]], "rft": [latest["stage_runs"]["rl"]], "pipeline": [stored["run"]["id"]]}
    assert _get(client, "/api/training/runs?kind=grpo")["runs"] == []


def test_compare_defaults_to_the_training_task_and_the_widest_gap(client: TestClient, stored: dict[str, Any]) -> None:
    rid = stored["run"]["id"]
    out = _get(client, f"/api/training/pipelines/{rid}/compare")
    gaps = _gaps(stored, PIPELINE_TASK)
    widest = max(gaps, key=lambda s: (abs(gaps[s][1] - gaps[s][0]), -s))  # the first seed of the largest gap
    assert (out["task"], out["split"], out["seed"], out["default_seed"]) == (PIPELINE_TASK, "holdout", widest, widest)
    assert out["tasks"] == [PIPELINE_TASK] and out["eval_run_id"] == stored["evidence"]["runs"]["eval"]
    assert [(s["seed"], s["sft"], s["trained"]) for s in out["seeds"]] == [(s, *gaps[s]) for s in sorted(gaps)]
    assert out == _get(client, f"/api/training/pipelines/{rid}/compare?task={PIPELINE_TASK}&seed={widest}")


def test_compare_puts_the_whole_task_beside_the_world(client: TestClient, stored: dict[str, Any]) -> None:
    ev = stored["evidence"]
    out = _get(client, f"/api/training/pipelines/{stored['run']['id']}/compare")
    summary = out["task_summary"]
    want = [r for r in ev["results"] if r["task"] == PIPELINE_TASK]
    assert [r["role"] for r in summary["roles"]] == [r["role"] for r in want]
    assert {"trained", "sft", "no_negotiation"} <= {r["role"] for r in summary["roles"]}
    for got, row in zip(summary["roles"], want, strict=True):
        assert (got["n"], got["mean"], got["deal_rate"]) == (row["n"], row["mean"], row["deal_rate"])
        assert "gain_share" in got  # None where the policy settled no deal
    comparisons = [c for c in ev["comparisons"] if c["task"] == PIPELINE_TASK]
    assert [(c["comparison"], c["mean_diff"]) for c in summary["comparisons"]] == \
        [(c["comparison"], c["mean_diff"]) for c in comparisons]


def test_compare_shows_both_stored_episodes_round_by_round(client: TestClient, stored: dict[str, Any],
                                                            store: Path) -> None:
    ev, rid = stored["evidence"], stored["run"]["id"]
    gaps = _gaps(stored, PIPELINE_TASK)
    with closing(sqlite3.connect(store / "arena.db")) as con:
        for seed, (sft_return, trained_return) in gaps.items():
            out = _get(client, f"/api/training/pipelines/{rid}/compare?seed={seed}")
            assert out["seed"] == seed and out["diff"] == pytest.approx(trained_return - sft_return, abs=1e-15)
            for role, want in (("sft", sft_return), ("trained", trained_return)):
                side = out["sides"][role]
                assert (side["role"], side["policy"], side["episode_return"]) == (role, ev["policies"][role], want)
                record = load_replay(con, ev["runs"]["eval"], ev["policies"][role], PIPELINE_TASK, seed)
                assert record is not None and side["seat"] == record["seat"] == "lab_0"
                transcript = record["transcript"]
                assert [r["action"] for r in side["rounds"]] == [t["actions"]["lab_0"] for t in transcript]
                assert [r["reward"] for r in side["rounds"]] == [t["rewards"]["lab_0"] for t in transcript]
                assert [(r["ok"], r["code"]) for r in side["rounds"]] == [tuple(t["results"]["lab_0"]) for t in transcript]
                assert side["rounds"][-1]["cumulative"] == pytest.approx(want, abs=1e-9)
                assert all(set(r["others"]) == set(t["actions"]) - {"lab_0"} for r, t in zip(side["rounds"], transcript, strict=True))
                # the reference opens the same episode in Replays
                frames = _get(client, f"/api/episodes/{side['ref']}/frames")
                assert (frames["policy"], frames["seed"], frames["task"]) == (ev["policies"][role], seed, PIPELINE_TASK)
                assert frames["frames"][-1]["cumulative"] == pytest.approx(want, abs=1e-12)


def test_unknown_runs_tasks_and_seeds_are_structured_404s(client: TestClient, stored: dict[str, Any]) -> None:
    rid = stored["run"]["id"]
    sft_run = stored["evidence"]["runs"]["sft"]  # a training run, but not a pipeline
    for path, code in ((f"/api/training/pipelines/{rid + 1000}", "pipeline_not_found"),
                       (f"/api/training/pipelines/{sft_run}", "pipeline_not_found"),
                       (f"/api/training/pipelines/{rid + 1000}/compare", "pipeline_not_found"),
                       (f"/api/training/pipelines/{sft_run}/compare?seed=0", "pipeline_not_found"),
                       (f"/api/training/pipelines/{rid}/compare?seed=999", "pipeline_episode_not_found"),
                       (f"/api/training/pipelines/{rid}/compare?task=market_round", "pipeline_episode_not_found"),
                       (f"/api/training/pipelines/{rid}/compare?task=market_round&seed=0", "pipeline_episode_not_found")):
        body = _get(client, path, 404)
        assert body["error"]["code"] == code and body["error"]["message"], path


def test_bad_query_types_are_422(client: TestClient, stored: dict[str, Any]) -> None:
    rid = stored["run"]["id"]
    for path in ("/api/training/pipelines/abc", "/api/training/pipelines/abc/compare", "/api/training/pipelines/1.5",
                 f"/api/training/pipelines/{rid}/compare?seed=abc", f"/api/training/pipelines/{rid}/compare?seed=-1",
                 f"/api/training/pipelines/{rid}/compare?seed=1e3", f"/api/training/pipelines/{rid}/compare?seed={2**64}",
                 f"/api/training/pipelines/{rid}/compare?task=chess", "/api/training/runs?kind=ppo",
                 "/api/training/runs?kind=pipeline&limit=0"):
        body = _get(client, path, 422)
        assert body["error"]["code"] == "invalid_request", path


def test_a_store_without_a_finished_pipeline(tmp_path: Path) -> None:
    """No pipeline: no headline and a 404 that names the command; a pipeline that failed before its
    evaluation: its stage runs from the rows its finished stages logged, and no Before vs after."""
    with TestClient(create_arena_app(settings_for(tmp_path))) as c:
        assert _get(c, "/api/overview")["training"]["pipeline"] is None
        body = _get(c, "/api/training/pipelines/latest", 404)
        assert body["error"]["code"] == "pipeline_not_found"
        assert body["error"]["command"].startswith("gpu-arena train pipeline --preset tiny")
        assert not (tmp_path / "arena.db").exists()  # reading never creates a store
        with closing(connect_runs(tmp_path / "arena.db")) as con:  # what a pipeline whose RL stage failed leaves
            pid = start_run(con, kind="pipeline", config={"command": "gpu-arena train pipeline --preset tiny"}, preset="tiny")
            sft = start_run(con, kind="sft", config={}, preset="tiny")
            log_metrics(con, sft, 1, 1.0, {"loss": 2.0})
            finish_run(con, sft, status="finished", duration_s=1.0)
            log_metrics(con, pid, 1, 1.0, {"stage": "data", "status": "finished", "wall_s": 0.5})
            log_metrics(con, pid, 2, 2.0, {"stage": "sft", "status": "finished", "wall_s": 1.0, "run_id": sft})
            finish_run(con, pid, status="failed", duration_s=3.0, summary={"error": "RuntimeError: out of memory"})
        view = _get(c, f"/api/training/pipelines/{pid}")
        assert view["stage_runs"] == {"sft": sft, "rl": None, "eval": None}
        assert (view["evidence"], view["headline"], view["error"]) == (None, None, "RuntimeError: out of memory")
        assert list(view["stages"]) == ["data", "sft"] and view["command"] == "gpu-arena train pipeline --preset tiny"
        assert _get(c, f"/api/training/pipelines/{pid}/compare", 404)["error"]["code"] == "pipeline_not_evaluated"
        assert _get(c, "/api/training/pipelines/latest", 404)["error"]["code"] == "pipeline_not_found"
        assert _get(c, "/api/overview")["training"]["pipeline"] is None


# ------------------------------------------------------------------------------------ in a headless Chromium


@pytest.fixture(scope="module")
def page(store: Path) -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("no chromium binary (make test installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with running_server(settings_for(store)) as url, sync_playwright() as pw:  # 127.0.0.1 only
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, timeout=TIMEOUT_MS)
        try:
            p = watched(browser.new_page(viewport={"width": 1280, "height": 900}), TIMEOUT_MS)
            p.base_url = url
            p.goto(url + "/")
            p.wait_for_selector("body[data-ready=true]")
            yield p
        finally:
            browser.close()


def _api(page: Any, path: str) -> Any:
    r = httpx.get(page.base_url + path, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def _value(page: Any, selector: str) -> float:
    return float(page.get_attribute(selector, "data-value"))


def test_browser_glance_evidence_and_before_vs_after(page: Any) -> None:
    head = _api(page, "/api/overview")["training"]["pipeline"]
    for row in head["rows"]:
        cell = f"#glance-pipeline-stats div[data-comparison='{row['comparison']}']"
        assert _value(page, f"{cell} dd.v") == pytest.approx(row["mean_diff"], abs=1e-12)
        text = page.inner_text(cell)
        assert f"{row['label']} on {PIPELINE_TASK}" in text and f"n={row['n']}" in text and "95% CI [" in text
    assert page.inner_text("#glance-pipeline-command") == head["command"]
    # Before vs after: opened from the nav, the default world shows both episodes
    page.click("nav a[href='#before-after']")
    compare = _api(page, f"/api/training/pipelines/{head['run_id']}/compare")
    page.wait_for_selector(f"#ba-body[data-seed='{compare['seed']}']:not([hidden])")
    shown_both(page, compare)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#before-after").screenshot(path=str(ARTIFACTS / "before-after.png"))
    # another seed from the gap table: both panes follow
    other = next(s["seed"] for s in compare["seeds"] if s["seed"] != compare["seed"])
    page.click(f"#ba-seeds tr[data-seed='{other}'] button")
    page.wait_for_selector(f"#ba-body[data-seed='{other}']")
    shown_both(page, _api(page, f"/api/training/pipelines/{head['run_id']}/compare?seed={other}"))
    assert page.input_value("#ba-seed") == str(other)
    # the trained side opens in Replays, step by step
    ref = page.get_attribute("#ba-trained", "data-ref")
    page.click("#ba-trained-open")
    page.wait_for_selector(f"#replay-a-body[data-ref='{ref}']")
    assert page.problems == []


def shown_both(page: Any, compare: dict[str, Any]) -> None:
    assert _value(page, "#ba-diff") == pytest.approx(compare["diff"], abs=1e-12)
    for role in ("sft", "trained"):
        side = compare["sides"][role]
        assert page.get_attribute(f"#ba-{role}", "data-ref") == side["ref"]
        assert _value(page, f"#ba-{role}-return") == pytest.approx(side["episode_return"], abs=1e-12)
        assert page.inner_text(f"#ba-{role}-policy") == side["policy"]
        rows = page.locator(f"#ba-{role}-rounds tbody tr")
        assert rows.count() == len(side["rounds"]) > 0
        assert [int(r) for r in rows.evaluate_all("rs => rs.map((r) => r.dataset.round)")] == [r["round"] for r in side["rounds"]]
    assert page.locator("#ba-chart g[data-series] polyline").count() == 2
    # the whole task beside the one world: every role's row and the task's paired comparisons
    summary = compare["task_summary"]
    for row in summary["roles"]:
        assert float(page.get_attribute(f"#ba-overall-roles tr[data-role='{row['role']}']", "data-mean")) == \
            pytest.approx(row["mean"], abs=1e-12)
    for c in summary["comparisons"]:
        assert _value(page, f"#ba-overall-comparisons tr[data-comparison='{c['comparison']}']") == \
            pytest.approx(c["mean_diff"], abs=1e-12)


def test_browser_training_shows_the_pipeline_stages_curves(page: Any) -> None:
    latest = _api(page, "/api/training/pipelines/latest")
    page.click(f"#training-table button[data-run='{latest['run']['id']}']")
    page.wait_for_selector(f"#training-run[data-run-id='{latest['run']['id']}']")
    page.wait_for_selector("figure[data-stage=rl]")
    sft = _api(page, f"/api/training/runs/{latest['stage_runs']['sft']}")
    rl = _api(page, f"/api/training/runs/{latest['stage_runs']['rl']}")
    loss = page.locator("figure[data-stage=sft][data-chart='Loss'] g[data-series='loss'] circle")
    assert loss.count() == len(sft["series"]["loss"]["value"])
    for name in ("reward", "greedy_reward", "arena/valid_action_rate"):
        assert page.locator(f"figure[data-stage=rl] g[data-series='{name}'] circle").count() == len(rl["series"][name]["value"])
    comparisons = page.locator("#training-pipeline-evidence tbody tr")
    assert comparisons.count() == len(latest["evidence"]["comparisons"])
    first = latest["evidence"]["comparisons"][0]
    assert float(comparisons.first.locator("td.mean").get_attribute("data-value")) == pytest.approx(first["mean_diff"])
    assert page.locator("#training-pipeline-stages tbody tr").count() == 4
    words = set(page.locator("main").inner_text().replace(",", " ").split())
    assert not words & {"null", "undefined", "NaN"}
    assert page.problems == []


def test_the_training_commands_listed_are_the_clis() -> None:
    """The Training section's list of commands (a constant: the dashboard never imports the CLI)
    names exactly the CLI's `data sft` and `train` subcommands."""
    import typer

    from gpu_arena.cli import app
    from gpu_arena.dashboard.routes import TRAINING_COMMANDS

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    expected = ["gpu-arena data sft"] + [f"gpu-arena train {s} --help" for s in sorted(commands["train"].commands)]
    assert "sft" in commands["data"].commands
    assert list(TRAINING_COMMANDS) == expected
