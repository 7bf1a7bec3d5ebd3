"""The dashboard's server side: the page and its assets at ``/``, ``/api/overview``,
``/api/results/latest`` (against a real stored evaluation run), ``/api/sessions/{id}/autostep``,
stored episodes (list, frames, forks), judge pitches and the Reference section's routes."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from dashboard_helpers import store_eval_run, store_training_run
from gpu_arena.core.types import ACTION_TYPES, REWARD_COLUMNS, TASKS
from gpu_arena.dashboard.app import create_arena_app
from gpu_arena.dashboard.routes import web_dir
from gpu_arena.evaluation.replay import replay_episode
from gpu_arena.evaluation.store import connect, load_run
from gpu_arena.models import ArenaObservation
from gpu_arena.policies import policy_names
from server_helpers import Plan, comparable, replay_in_process, running_server, settings_for


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


# ---------------------------------------------------------------------------------- replays and forks


@pytest.fixture
def stored(tmp_path: Path) -> Any:
    """A server whose store holds a real evaluation run with its replays kept."""
    run_id = store_eval_run(tmp_path / "arena.db", "holdout", keep_replays=True)
    with TestClient(create_arena_app(settings_for(tmp_path))) as c:
        c.run_id = run_id  # type: ignore[attr-defined]
        yield c


def _recorded_seat_actions(record: dict[str, Any]) -> list[dict[str, Any]]:
    seat = record.get("seat", "lab_0")
    return [rnd["actions"].get(seat, {"action_type": "wait"}) for rnd in record["transcript"]]


def test_episode_list_covers_the_stored_evaluation_episodes(stored: TestClient) -> None:
    listed = stored.get("/api/episodes?limit=500").json()["episodes"]
    con = connect(stored.app.state.settings.db)
    n = con.execute("SELECT count(*) FROM episodes WHERE replay IS NOT NULL").fetchone()[0]
    con.close()
    assert len(listed) == n == 12 and all(e["source"] == "eval" and e["run_id"] == stored.run_id for e in listed)
    one = stored.get("/api/episodes?task=market_round&seed=1&policy=rule_expert").json()["episodes"]
    assert [(e["task"], e["seed"], e["policy"]) for e in one] == [("market_round", 1, "rule_expert")]
    record = stored.get(f"/api/episodes/{one[0]['ref']}").json()
    assert (record["task"], record["seed"], record["policy"], record["opponents"]) == ("market_round", 1, "rule_expert",
                                                                                      "archetypes")
    assert one[0]["steps"] == len(record["transcript"])
    assert stored.get("/api/episodes?source=served").json()["episodes"] == []
    assert stored.get("/api/episodes?task=nope").status_code == 422
    assert stored.get("/api/episodes?limit=0").status_code == 422


@pytest.mark.parametrize("task", ["single_trade", "market_round"])
def test_frames_replay_the_record_step_by_step(stored: TestClient, task: str) -> None:
    ref = stored.get(f"/api/episodes?task={task}&seed=2&policy=rule_expert").json()["episodes"][0]["ref"]
    record = stored.get(f"/api/episodes/{ref}").json()
    data = stored.get(f"/api/episodes/{ref}/frames").json()
    frames = data["frames"]
    assert data["steps"] == len(record["transcript"]) == len(frames) - 1
    # the seat's observations are exactly what an in-process episode with the same actions gives
    plan = Plan(task, 2, "holdout")
    expected = replay_in_process(plan, _recorded_seat_actions(record))
    got = [comparable(ArenaObservation.model_validate({**f["observation"], "metadata": {}})) for f in frames]
    assert got == [{**e, "metadata": {}} for e in expected]
    for i, f in enumerate(frames[1:]):
        assert f["round"]["actions"] == record["transcript"][i]["actions"]
        assert f["reward"] == pytest.approx(record["transcript"][i]["rewards"]["lab_0"], abs=1e-12)
    assert frames[-1]["cumulative"] == pytest.approx(record["episode_return"], abs=1e-12)
    assert frames[0]["reward"] is None and frames[-1]["done"]


def test_fork_is_a_real_session_that_plays_on_from_the_step(stored: TestClient) -> None:
    ref = stored.get("/api/episodes?task=market_round&seed=0&policy=rule_expert").json()["episodes"][0]["ref"]
    record = stored.get(f"/api/episodes/{ref}").json()
    frames = stored.get(f"/api/episodes/{ref}/frames").json()["frames"]
    k = 2
    fork = stored.post(f"/api/episodes/{ref}/fork?step={k}")
    assert fork.status_code == 201, fork.text
    view = fork.json()
    assert (view["forked_from"], view["fork_step"], view["step_count"], view["done"]) == (ref, k, k, False)
    strip = lambda o: {**o, "metadata": {}}  # noqa: E731
    assert strip(view["observation"]) == strip(frames[k]["observation"])
    # the same seat actions from there give the recorded rest of the episode: the world, the clock and
    # every opponent's policy state were restored, not only the board
    sid = view["session_id"]
    for action in _recorded_seat_actions(record)[k:]:
        last = stored.post(f"/api/sessions/{sid}/step", json=action).json()
    assert last["done"] and last["replay_id"]
    forked = stored.get(f"/api/episodes/{last['replay_id']}").json()
    assert forked["transcript"] == record["transcript"]
    assert forked["forked_from"] == {"ref": ref, "step": k}
    assert forked["episode_return"] == pytest.approx(record["episode_return"], abs=1e-12)
    listed = stored.get("/api/episodes?source=served").json()["episodes"]
    assert [(e["ref"], e["forked_from"]) for e in listed] == [(last["replay_id"], ref)]
    # a different move after the fork plays a different game
    other = stored.post(f"/api/episodes/{ref}/fork?step={k}").json()
    moved = stored.post(f"/api/sessions/{other['session_id']}/step", json={"action_type": "accept_offer"}).json()
    assert moved["observation"]["last_action_result"]["code"] == "missing_field" and moved["reward"] == -0.01


def test_a_served_episode_forks_too(stored: TestClient) -> None:
    _, steps = _play(stored, "random_valid", task="single_trade", seed=4, judge_mode="rule")
    ref = steps[-1]["replay_id"]
    record = stored.get(f"/api/episodes/{ref}").json()
    view = stored.post(f"/api/episodes/{ref}/fork?step=1").json()
    assert view["step_count"] == 1 and view["observation"]["round_index"] == steps[0]["observation"]["round_index"]
    for action in [s["action"] for s in steps][1:]:
        last = stored.post(f"/api/sessions/{view['session_id']}/step", json=action).json()
    assert stored.get(f"/api/episodes/{last['replay_id']}").json()["transcript"] == record["transcript"]


def test_fork_and_frames_refuse_bad_requests(stored: TestClient) -> None:
    ref = stored.get("/api/episodes?task=single_trade&seed=0").json()["episodes"][0]["ref"]
    steps = len(stored.get(f"/api/episodes/{ref}").json()["transcript"])
    for bad, status, code in ((f"/api/episodes/{ref}/fork?step={steps}", 422, "invalid_fork_step"),
                              (f"/api/episodes/{ref}/fork?step=-1", 422, "invalid_request"),
                              ("/api/episodes/eval-99-1/fork", 404, "episode_not_found"),
                              ("/api/episodes/" + "0" * 32 + "/fork", 404, "episode_not_found"),
                              ("/api/episodes/not-a-ref/fork", 422, "invalid_request")):
        r = stored.post(bad)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), bad
    assert stored.get("/api/episodes/eval-99-1/frames").status_code == 404
    assert stored.get("/api/sessions").json()["active_sessions"] == 0  # refused forks hold no slot
    # a record that no longer replays to its transcript is a 409, for frames and forks alike
    con = connect(stored.app.state.settings.db)
    row = int(ref.split("-")[2])
    replay = json.loads(con.execute("SELECT replay FROM episodes WHERE rowid = ?", (row,)).fetchone()[0])
    replay["transcript"][0]["rewards"]["lab_0"] = 0.5
    with con:
        con.execute("UPDATE episodes SET replay = ? WHERE rowid = ?", (json.dumps(replay), row))
    con.close()
    for r in (stored.get(f"/api/episodes/{ref}/frames"), stored.post(f"/api/episodes/{ref}/fork?step=1")):
        assert (r.status_code, r.json()["error"]["code"]) == (409, "replay_mismatch")
    assert stored.get("/api/sessions").json()["active_sessions"] == 0


def test_judged_episode_frames_show_every_pitch_with_score_and_reasons(client: TestClient) -> None:
    _, steps = _play(client, "rule_expert", task="single_trade", seed=2, judge_mode="rule")
    ref = steps[-1]["replay_id"]
    assert [e["ref"] for e in client.get("/api/episodes?judge_mode=rule").json()["episodes"]] == [ref]
    assert client.get("/api/episodes?judge_mode=none").json()["episodes"] == []
    last = client.get(f"/api/episodes/{ref}/frames").json()["frames"][-1]
    world = replay_episode(client.get(f"/api/episodes/{ref}").json()).world
    truth = [{"block_id": a.block_id, "winner": a.winner, "pitches": {lab: (p.score, p.reasons) for lab, p in a.pitches.items()}}
             for a in world.auctions.values()]
    shown = [{"block_id": a["block_id"], "winner": a["winner"],
              "pitches": {lab: (p["score"], p["reasons"]) for lab, p in a["pitches"].items()}} for a in last["auctions"]]
    assert shown == truth
    pitches = [p for a in last["auctions"] for p in a["pitches"].values()]
    assert pitches and all(p["score"] is not None and p["reasons"] for p in pitches)
    # the seat itself saw only its own pitch's score while playing
    live = [p for s in steps for a in s["observation"]["public_market"]["auctions"] for p in a["pitches"]]
    assert all(p["score"] is None for p in live if p["lab_id"] != "lab_0")


# ---------------------------------------------------------------------------------- reference


def test_reward_design_comes_from_the_registries(client: TestClient) -> None:
    from gpu_arena.core import engine
    from gpu_arena.core.rules import CATEGORY_COLUMNS

    r = client.get("/api/reference/reward").json()
    assert [c["name"] for c in r["columns"]] == list(REWARD_COLUMNS)
    by_name = {c["name"]: c for c in r["columns"]}
    for category, (value_col, money_col) in CATEGORY_COLUMNS.items():
        assert category in {m["category"] for m in by_name[value_col]["moved_by"]}
        assert category in {m["category"] for m in by_name[money_col]["moved_by"]}
    assert (by_name["spam_penalty"]["each"], by_name["spam_penalty"]["cap"]) == (-engine.PENALTY_SPAM, -engine.SPAM_CAP)
    assert (by_name["breach_penalty"]["each"], by_name["breach_penalty"]["cap"]) == (-engine.PENALTY_BREACH,
                                                                                    -engine.BREACH_CAP)
    assert r["judge"]["weights"]["evidence"] == pytest.approx(0.4)


def test_the_actions_said_to_move_each_column_are_the_ones_that_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """Play random episodes and record which action types the rules book to which ledger category:
    every one observed must be listed in the Reference section's table."""
    from gpu_arena.core import engine
    from gpu_arena.dashboard.reference import CATEGORY_EVENTS

    seen: set[tuple[str, str]] = set()
    real = engine.apply_action

    def spy(world: Any, lab_id: str, action: Any) -> Any:
        outcome = real(world, lab_id, action)
        seen.add((action.action_type, outcome.category))
        return outcome

    monkeypatch.setattr(engine, "apply_action", spy)
    from gpu_arena.env import GpuArenaEnv
    from gpu_arena.policies import make_policy

    for task, seed, policy in [(t, s, p) for t in TASKS for s in range(3) for p in ("random_valid", "rule_expert")]:
        env = GpuArenaEnv(opponents="random_valid", engine="python")  # the spy watches the Python core's rules
        obs = env.reset(seed=seed, task=task, judge_mode="rule")
        me = make_policy(policy, seed=seed)
        while not obs.done:
            assert env.episode is not None
            obs = env.step(me.act(env.episode.observe("lab_0")))
    booked = {(a, c) for a, c in seen if c in CATEGORY_EVENTS}
    assert {c for _, c in booked} >= {"deal", "allocation"}
    for action_type, category in booked:
        assert action_type in CATEGORY_EVENTS[category]["actions"], (action_type, category)


def test_action_space_lists_every_type_with_schema_fields(client: TestClient) -> None:
    from gpu_arena.models import ArenaAction

    space = client.get("/api/reference/actions").json()
    assert [t["type"] for t in space["action_types"]] == list(ACTION_TYPES)
    props = ArenaAction.model_json_schema()["properties"]
    for t in space["action_types"]:
        assert all(f["name"] in props for f in t["fields"]) and set(t["required"]) <= {f["name"] for f in t["fields"]}
    assert space["schema"] == ArenaAction.model_json_schema()


def test_sft_sample_says_when_there_is_none_and_reads_the_newest(client: TestClient, tmp_path: Path) -> None:
    none = client.get("/api/reference/sft-sample").json()
    assert none["dataset"] is None and none["command"] == f"gpu-arena data sft --output {tmp_path / 'sft'}"
    assert client.get("/api/artifacts/sft.jsonl").json()["error"]["code"] == "dataset_not_found"
    data = tmp_path / "datasets" / "sft-train.jsonl"  # beside the store (tmp_path/arena.db)
    data.parent.mkdir()
    records = [{"messages": [{"role": "user", "content": f"round {i}"}, {"role": "assistant", "content": "{}"}]}
               for i in range(3)]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    (data.parent / "provenance.json").write_text(json.dumps({"policy": "rule_expert", "episodes": 3}))
    got = client.get("/api/reference/sft-sample").json()
    assert got["sample"] == records[0] and got["dataset"]["name"] == "datasets/sft-train.jsonl"
    assert got["dataset"]["provenance"] == {"policy": "rule_expert", "episodes": 3}
    assert client.get("/api/artifacts/sft.jsonl").text == data.read_text()
    assert any(a["kind"] == "dataset" for a in client.get("/api/artifacts").json()["artifacts"])


def test_artifacts_download_the_store_numbers(stored: TestClient) -> None:
    listed = stored.get("/api/artifacts").json()["artifacts"]
    assert {(a["kind"], a["format"]) for a in listed} == {("results", "json"), ("results", "csv"), ("replays", "jsonl")}
    api_rows = stored.get("/api/results/latest?split=holdout").json()["rows"]
    csv_rows = list(csv.DictReader(io.StringIO(stored.get("/api/artifacts/results.csv?split=holdout").text)))
    assert [(r["task"], r["policy"], float(r["mean"])) for r in csv_rows] == [
        (r["task"], r["policy"], r["mean"]) for r in api_rows]
    assert stored.get("/api/artifacts/results.json?split=holdout").json()["results"] == api_rows
    lines = stored.get("/api/artifacts/replays.jsonl?split=holdout").text.splitlines()
    assert len(lines) == 12
    first = json.loads(lines[0])
    assert stored.get(f"/api/episodes/{first['ref']}").json()["transcript"] == first["transcript"]
    assert stored.get("/api/artifacts/results.csv?split=train").json()["error"]["code"] == "run_not_found"


def test_api_examples_run_against_the_server(tmp_path: Path) -> None:
    with running_server(settings_for(tmp_path)) as url:
        ex = httpx.get(url + "/api/reference/examples").json()
        assert ex["docs"] == url + "/docs" and httpx.get(ex["docs"]).status_code == 200
        python = [e["code"] for e in ex["examples"] if e["language"] == "python" and "urllib" in e["code"]]
        out = subprocess.run([sys.executable, "-c", python[0]], capture_output=True, text=True, timeout=60, check=True)
        replay_id = out.stdout.split()[-1]
        record = httpx.get(f"{url}/api/episodes/{replay_id}").json()
        assert float(out.stdout.split()[1]) == pytest.approx(record["episode_return"], abs=1e-6)
        curl = shutil.which("curl")
        if curl:
            first = next(e["code"] for e in ex["examples"] if e["language"] == "bash")
            made = subprocess.run(first, shell=True, capture_output=True, text=True, timeout=30, check=True)
            assert json.loads(made.stdout)["observation"]["task"] == "single_trade"


def test_training_lists_stored_runs_and_serves_their_curves(client: TestClient, tmp_path: Path) -> None:
    training = client.get("/api/overview").json()["training"]
    assert (training["runs_in_store"], training["message"]) == (0, "no training runs in the store")
    assert training["latest"] == {"sft": None, "rft": None, "grpo": None}
    assert training["pipeline"] is None and training["pipeline_command"].startswith("gpu-arena train pipeline")
    assert f"gpu-arena data sft --output {tmp_path / 'sft'}" in training["commands"]
    assert client.get("/api/training/runs").json()["runs"] == []
    missing = client.get("/api/training/runs/1")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "training_run_not_found"
    sft = store_training_run(tmp_path / "arena.db", "sft", steps=3)
    grpo = store_training_run(tmp_path / "arena.db", "grpo", steps=5)
    training = client.get("/api/overview").json()["training"]
    assert training["runs_in_store"] == 2 and training["message"] == "2 training runs in the store"
    assert training["latest"]["grpo"]["id"] == grpo and training["latest"]["sft"]["id"] == sft
    runs = client.get("/api/training/runs").json()["runs"]
    assert [r["id"] for r in runs] == [grpo, sft] and runs[0]["n_logs"] == 5 and runs[0]["last_step"] == 5
    assert [r["id"] for r in client.get("/api/training/runs?kind=sft").json()["runs"]] == [sft]
    assert client.get("/api/training/runs?kind=ppo").status_code == 422
    run = client.get(f"/api/training/runs/{grpo}").json()
    assert run["series"]["reward"]["step"] == [1, 2, 3, 4, 5]
    assert run["series"]["reward"]["value"] == pytest.approx([-0.04, -0.03, -0.02, -0.01, 0.0])
    assert all(f"rewards/{c}/mean" in run["series"] for c in REWARD_COLUMNS)
    assert client.get("/api/training/runs/abc").status_code == 422
    for huge in (2**63, 10**20):  # past SQLite's integers: no such run, never a 500
        for path in (f"/api/training/runs/{huge}", f"/api/training/pipelines/{huge}",
                     f"/api/training/pipelines/{huge}/compare"):
            r = client.get(path)
            assert r.status_code == 404 and r.json()["error"]["code"], (path, r.text)


def test_play_offers_any_registered_policy_as_opponent(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """An LLM policy a deployment registers under a plain name (``register_policy``) is offered to
    Play's opponents and runs there; ``llm:`` family names are never offered."""
    import gpu_arena.policies as registry
    from gpu_arena.core.policy import WaitPolicy

    made: list[str] = []

    def factory(**params: Any) -> WaitPolicy:
        made.append("house_llm")
        return WaitPolicy()

    monkeypatch.setitem(registry._REGISTRY, "house_llm", factory)
    ov = client.get("/api/overview").json()
    assert "house_llm" in ov["policies"]["opponents"] and ov["policies"]["opponents"][0] == "archetypes"
    assert not any(":" in name for name in ov["policies"]["opponents"])
    view = client.post("/api/sessions", json={"task": "market_round", "seed": 3, "opponents": "house_llm"})
    assert view.status_code == 201 and made == ["house_llm", "house_llm"]  # both other seats
    sid = view.json()["session_id"]
    step = client.post(f"/api/sessions/{sid}/step", json={"action_type": "wait"}).json()
    assert step["observation"]["last_action_result"]["ok"]
    refused = client.post("/api/sessions", json={"opponents": "llm:openai:m@http://127.0.0.1:9"})
    assert refused.status_code == 422


def test_a_store_row_changed_by_hand_is_a_structured_503_not_a_bare_500(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "arena.db"
    run_id = store_eval_run(db, "holdout", keep_replays=True)
    with TestClient(create_arena_app(settings_for(tmp_path))) as c:
        ref = c.get("/api/episodes?source=eval").json()["episodes"][0]["ref"]
        assert c.get(f"/api/episodes/{ref}").status_code == 200
        con = sqlite3.connect(db)
        with con:
            con.execute("UPDATE episodes SET replay = '{\"transcript\": [' WHERE run_id = ?", (run_id,))
            con.execute("UPDATE results SET row = 'not json {' WHERE run_id = ?", (run_id,))
        con.close()
        for path in (f"/api/episodes/{ref}", "/api/results/latest", "/api/episodes?source=all"):
            r = c.get(path)
            assert r.status_code == 503 and r.json()["error"]["code"] == "store_unreadable", (path, r.text)
            assert "changed by hand" in r.json()["error"]["message"]
        # the page's first call still answers: the section is empty and the problem is named
        overview = c.get("/api/overview")
        assert overview.status_code == 200 and overview.json()["latest_eval"] is None
        assert any("changed by hand" in p for p in overview.json()["store_problems"])
