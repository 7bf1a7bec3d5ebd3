"""The server under load: 64 concurrent sessions (WebSocket and REST) play whole episodes on
different tasks and seeds, each transcript equals the in-process one (zero cross-talk), the 65th
session is refused, and every finished episode is stored and replays identically."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from gpu_arena.client import GpuArenaClient
from gpu_arena.evaluation.replay import replay_episode
from gpu_arena.models import ArenaObservation
from server_helpers import (
    Plan,
    comparable,
    driver,
    plans,
    replay_in_process,
    running_server,
    settings_for,
    wire_action,
)

N = 64


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with running_server(settings_for(tmp_path_factory.mktemp("srv"), max_sessions=N)) as url:
        yield url


async def _play_ws(client: GpuArenaClient, plan: Plan) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    policy = driver(plan)
    result = await client.reset(**plan.reset_args)
    seen, sent = [comparable(result.observation)], []
    while not result.done:
        action = wire_action(policy, result.observation)
        sent.append(action)
        result = await client.step(action)
        seen.append(comparable(result.observation))
        await asyncio.sleep(0)  # interleave the sessions' steps as much as possible
    return seen, sent, result.observation.metadata["replay_id"]


def _check_replays(base_url: str, episodes: list[tuple[Plan, list[dict[str, Any]], list[dict[str, Any]], str]]) -> None:
    with httpx.Client(base_url=base_url) as http:
        for plan, seen, sent, replay_id in episodes:
            assert seen == replay_in_process(plan, sent), f"session {plan} saw another episode's steps"
            record = http.get(f"/api/episodes/{replay_id}").json()
            assert (record["task"], record["seed"], record["split"]) == (plan.task, plan.seed, plan.split)
            assert len(record["transcript"]) == len(sent)
            assert replay_episode(record).transcript == record["transcript"]


def test_64_websocket_sessions_are_isolated_and_the_65th_is_refused(base_url: str) -> None:
    async def main() -> list[tuple[Plan, list[dict[str, Any]], list[dict[str, Any]], str]]:
        todo = plans(N)
        clients = [GpuArenaClient(base_url=base_url) for _ in todo]
        await asyncio.gather(*(c.connect() for c in clients))
        # every session holds a slot from its first message on: reset them all before the 65th knocks
        await asyncio.gather(*(c.reset(seed=0) for c in clients))
        extra = GpuArenaClient(base_url=base_url)
        with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
            await extra.reset(seed=0)
        await extra.close()
        try:
            played = await asyncio.gather(*(_play_ws(c, p) for c, p in zip(clients, todo, strict=True)))
        finally:
            await asyncio.gather(*(c.close() for c in clients))
        return [(p, *r) for p, r in zip(todo, played, strict=True)]

    _check_replays(base_url, asyncio.run(main()))


async def _play_rest(http: httpx.AsyncClient, session_id: str, first: dict[str, Any], plan: Plan
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    policy = driver(plan)
    view = first
    obs = ArenaObservation.model_validate(view["observation"])
    seen, sent = [comparable(obs)], []
    while not view["done"]:
        action = wire_action(policy, obs)
        sent.append(action)
        r = await http.post(f"/api/sessions/{session_id}/step", json=action)
        assert r.status_code == 200, r.text
        view = r.json()
        obs = ArenaObservation.model_validate(view["observation"])
        seen.append(comparable(obs))
    assert view["replay_id"] == obs.metadata["replay_id"]
    return seen, sent, view["replay_id"]


def test_64_rest_sessions_are_isolated_and_the_65th_is_refused(base_url: str) -> None:
    async def main() -> list[tuple[Plan, list[dict[str, Any]], list[dict[str, Any]], str]]:
        todo = plans(N)
        limits = httpx.Limits(max_connections=N)
        async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60) as http:
            created = await asyncio.gather(*(http.post("/api/sessions", json=p.reset_args) for p in todo))
            assert [r.status_code for r in created] == [201] * N
            views = [r.json() for r in created]
            refused = await http.post("/api/sessions", json={"seed": 1})
            assert refused.status_code == 429 and refused.headers["retry-after"]
            assert refused.json()["error"]["code"] == "capacity_reached"
            assert refused.json()["error"]["max_sessions"] == N
            played = await asyncio.gather(*(_play_rest(http, v["session_id"], v, p)
                                            for v, p in zip(views, todo, strict=True)))
            for v in views:
                assert (await http.delete(f"/api/sessions/{v['session_id']}")).status_code == 200
            assert (await http.post("/api/sessions", json={"seed": 1})).status_code == 201  # slots are free again
        return [(p, *r) for p, r in zip(todo, played, strict=True)]

    _check_replays(base_url, asyncio.run(main()))


def test_sync_client_plays_an_episode_and_sees_no_private_state(base_url: str) -> None:
    plan = Plan("market_round", 5, policy="rule_expert")
    policy = driver(plan)
    with GpuArenaClient(base_url=base_url).sync() as env:
        result = env.reset(**plan.reset_args)
        actions = []
        while not result.done:
            actions.append(wire_action(policy, result.observation))
            result = env.step(actions[-1])
        state = env.state()
        assert state.world == {} and state.done and state.task == "market_round" and state.seed == 5
        assert state.step_count == len(actions)
        # after the end: a structured error, not a new episode
        again = env.step({"action_type": "wait"})
        assert again.done and again.observation.last_action_result.code == "episode_done"
        # and the connection is good for the next episode
        assert env.reset(task="single_trade", seed=1).observation.task == "single_trade"


def test_rest_view_state_and_reset_in_a_session(base_url: str) -> None:
    with httpx.Client(base_url=base_url) as http:
        sid = http.post("/api/sessions", json={"task": "coalition_market", "seed": 9}).json()["session_id"]
        view = http.get(f"/api/sessions/{sid}").json()
        assert view["observation"]["task"] == "coalition_market" and view["step_count"] == 0
        stepped = http.post(f"/api/sessions/{sid}/step", json={"action_type": "wait"}).json()
        assert stepped["step_count"] == 1 and stepped["observation"]["round_index"] == 1
        assert http.get(f"/api/sessions/{sid}").json()["observation"] == stepped["observation"]
        state = http.get(f"/api/sessions/{sid}/state").json()
        assert state["world"] == {} and state["round_index"] == 1  # no god view unless the server says so
        fresh = http.post(f"/api/sessions/{sid}/reset", json={"index": 0, "split": "holdout", "seed": 2}).json()
        assert (fresh["observation"]["task"], fresh["observation"]["split"], fresh["step_count"]) == \
            ("single_trade", "holdout", 0)
        assert http.delete(f"/api/sessions/{sid}").status_code == 200
        gone = http.get(f"/api/sessions/{sid}")
        assert gone.status_code == 410 and gone.json()["error"]["code"] == "session_closed"
        missing = http.get("/api/sessions/no-such-session")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "session_not_found"
        assert http.get("/api/episodes/" + "0" * 32).json()["error"]["code"] == "episode_not_found"
        assert http.get("/api/episodes/not-an-id").status_code == 422


def test_openenv_routes_task_api_and_validate(base_url: str) -> None:
    from openenv.cli._validation import validate_running_environment

    report = validate_running_environment(base_url)
    assert report["passed"], report["criteria"]
    with httpx.Client(base_url=base_url) as http:
        assert http.get("/gpu_arena/splits").json() == [{"name": "train", "type": "train"},
                                                      {"name": "holdout", "type": "test"}]
        tasks = http.post("/gpu_arena/tasks", json={"split": "holdout"}).json()["tasks"]
        assert [t["task"] for t in tasks] == ["single_trade", "market_round", "coalition_market"]
        assert http.post("/gpu_arena/num_tasks", json={"split": "train"}).json() == {"num_tasks": 3}
        assert http.post("/gpu_arena/task", json={"split": "train", "index": 3}).status_code == 400
        assert http.post("/gpu_arena/tasks", json={"split": "test"}).json()["error"]["code"] == "unknown_split"
        # OpenEnv's stateless routes: a reset answers an observation, a bad one a structured 422
        obs = http.post("/reset", json={"seed": 3, "task": "market_round"}).json()
        assert obs["observation"]["task"] == "market_round" and obs["done"] is False
        bad = http.post("/reset", json={"task": "chess"})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_reset_arguments"
        assert http.post("/step", json={"action": {"action_type": "wait"}}).json()["observation"][
            "last_action_result"]["code"] == "not_reset"
        schema = http.get("/schema").json()
        assert "action_type" in schema["action"]["properties"] and "world" in schema["state"]["properties"]
