"""The dashboard's server side: the page and its assets at ``/``, ``/api/overview``,
``/api/results/latest`` (against a real stored evaluation run) and ``/api/sessions/{id}/autostep``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from dashboard_helpers import store_eval_run
from gpu_arena.core.types import ACTION_TYPES, REWARD_COLUMNS, TASKS
from gpu_arena.evaluation.store import connect, load_run
from gpu_arena.models import ArenaObservation
from gpu_arena.policies import policy_names
from gpu_arena.server.app import create_arena_app
from gpu_arena.server.dashboard import web_dir
from server_helpers import Plan, comparable, replay_in_process, settings_for


@pytest.fixture
def client(tmp_path: Path) -> Any:
    with TestClient(create_arena_app(settings_for(tmp_path))) as c:
        yield c


def test_the_page_and_every_module_it_imports_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/assets/app.js">' in page.text
    # follow the module graph from the page: a missing or misnamed asset would break the page offline
    todo, seen = ["app.js", "style.css"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        r = client.get(f"/assets/{name}")
        assert r.status_code == 200, name
        todo += re.findall(r'from "\./([\w.]+)"', r.text)
    assert seen == {p.name for p in web_dir().iterdir() if p.suffix in (".js", ".css")}
    assert "http://" not in page.text and "https://" not in page.text  # no CDN
    assert client.get("/docs").status_code == 200


def test_overview_comes_from_the_registries_and_an_empty_store(client: TestClient, tmp_path: Path) -> None:
    ov = client.get("/api/overview").json()
    assert [t["task"] for t in ov["tasks"]] == list(TASKS)
    assert ov["tasks"][0] == {"task": "single_trade", "labs": [2, 2], "rounds": [3, 4], "shocks": [0, 0]}
    assert ov["action_types"] == list(ACTION_TYPES)
    assert ov["reward_columns"]["all"] == list(REWARD_COLUMNS)
    assert ov["policies"]["all"] == policy_names()
    assert "rule_expert" in ov["policies"]["seat"] and not any(":" in p for p in ov["policies"]["seat"])
    assert ov["latest_eval"] is None
    assert not (tmp_path / "arena.db").exists()  # reading the dashboard never creates a store


def test_results_follow_the_store_per_split(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    holdout_id = store_eval_run(db, "holdout")
    train_id = store_eval_run(db, "train")
    con = connect(db)
    stored = {rid: load_run(con, rid) for rid in (holdout_id, train_id)}
    con.close()
    with TestClient(create_arena_app(settings_for(tmp_path))) as c:
        ov = c.get("/api/overview").json()
        assert ov["latest_eval"]["id"] == train_id and ov["latest_eval"]["episodes"] == 12
        assert ov["latest_eval"]["policies"] == ["no_negotiation", "rule_expert"]
        for split, rid in (("holdout", holdout_id), ("train", train_id)):
            res = c.get(f"/api/results/latest?split={split}").json()
            assert res["run"]["id"] == rid and res["split"] == split
            run = stored[rid]
            assert run is not None
            assert res["rows"] == run["results"]  # the store's numbers, untouched
            assert {(r["task"], r["policy"]) for r in res["rows"]} == {
                (t, p) for t in ("single_trade", "market_round") for p in ("no_negotiation", "rule_expert")}
        bad = c.get("/api/results/latest?split=test")
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"


def test_results_without_a_run_give_the_command_that_makes_one(client: TestClient) -> None:
    res = client.get("/api/results/latest?split=train").json()
    assert res["run"] is None and res["rows"] == []
    assert res["command"].startswith("gpu-arena eval --split train")


def _play(c: TestClient, policy: str, **reset: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    first = c.post("/api/sessions", json=reset)
    assert first.status_code == 201
    sid, views = first.json()["session_id"], [first.json()]
    while not views[-1]["done"]:
        r = c.post(f"/api/sessions/{sid}/autostep", json={"policy": policy})
        assert r.status_code == 200, r.text
        views.append(r.json())
    return views[0], views[1:]


@pytest.mark.parametrize(("task", "policy"), [("single_trade", "rule_expert"), ("market_round", "random_valid"),
                                              ("coalition_market", "oracle")])
def test_autostep_plays_the_same_episode_as_in_process(client: TestClient, task: str, policy: str) -> None:
    first, steps = _play(client, policy, task=task, seed=11, split="holdout")
    assert all(s["policy"] == policy and s["action"]["action_type"] in ACTION_TYPES for s in steps)
    # the actions the server's policy chose, sent again in-process, give the same observations
    plan = Plan(task, 11, "holdout")
    transcript = replay_in_process(plan, [s["action"] for s in steps])
    got = [first["observation"], *(s["observation"] for s in steps)]
    assert [comparable(ArenaObservation.model_validate(o)) for o in got] == transcript
    # and the page's cumulative reward (a sum of step rewards) is the stored episode return
    record = client.get(f"/api/episodes/{steps[-1]['replay_id']}").json()
    assert sum(s["reward"] for s in steps) == pytest.approx(record["episode_return"], abs=1e-12)
    assert len(record["transcript"]) == len(steps)


def test_autostep_is_deterministic_per_seed(client: TestClient) -> None:
    runs = [_play(client, "random_valid", task="market_round", seed=5)[1] for _ in range(2)]
    assert [s["action"] for s in runs[0]] == [s["action"] for s in runs[1]]


def test_autostep_refuses_bad_requests(client: TestClient) -> None:
    sid = client.post("/api/sessions", json={"task": "single_trade", "seed": 1}).json()["session_id"]
    for body in ({"policy": "nope"}, {"policy": "llm:openai:x@http://localhost"}, {"policy": "wait", "x": 1}):
        r = client.post(f"/api/sessions/{sid}/autostep", json=body)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", body
    assert client.post("/api/sessions/unknown/autostep", json={}).status_code == 404
    # no body: the default policy plays
    assert client.post(f"/api/sessions/{sid}/autostep").json()["policy"] == "rule_expert"
    while not client.post(f"/api/sessions/{sid}/autostep", json={"policy": "wait"}).json()["done"]:
        pass
    after = client.post(f"/api/sessions/{sid}/autostep", json={"policy": "wait"}).json()
    assert after["action"] == {} and after["observation"]["last_action_result"]["code"] == "episode_done"
    client.delete(f"/api/sessions/{sid}")
    gone = client.post(f"/api/sessions/{sid}/autostep", json={"policy": "wait"})
    assert gone.status_code == 410 and gone.json()["error"]["code"] == "session_closed"
