"""Hard edges: size and shape limits, bad input on every route, idle expiry, the god-view switch.

Every refusal is a 4xx with a structured body (HTTP) or an error frame (WebSocket); nothing is
half-applied, and the session goes on as if the bad request had never been sent."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from server_helpers import running_server, settings_for

MAX_BODY = 8192


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with running_server(settings_for(tmp_path_factory.mktemp("srv"), max_body_bytes=MAX_BODY)) as url:
        yield url


@pytest.fixture(scope="module")
def short_lived(tmp_path_factory: pytest.TempPathFactory) -> Any:
    settings = settings_for(tmp_path_factory.mktemp("srv2"), idle_timeout_s=0.6, reaper_interval_s=0.1, god_view=True,
                            max_sessions=2)
    with running_server(settings) as url:
        yield url


def _ws(base_url: str) -> Any:
    return connect(base_url.replace("http", "ws") + "/ws", max_size=None)


def _ask(ws: Any, message: Any) -> dict[str, Any]:
    ws.send(message if isinstance(message, str | bytes) else json.dumps(message))
    return json.loads(ws.recv(timeout=10))


NESTED = "[" * 2000 + "]" * 2000  # deeper than the parser's recursion allows
DEEP = "[" * 100 + "]" * 100  # parses, but deeper than max_json_depth
BAD_BODIES = [
    ("x" * (MAX_BODY + 1), 413, "payload_too_large"),
    ('{"action_type": "send_offer", "conditions": ' + NESTED + "}", 400, "invalid_json"),
    ('{"action_type": "send_offer", "metadata": {"x": ' + DEEP + "}}", 400, "invalid_json"),
    ('{"action_type": "send_offer", "payment": NaN}', 400, "invalid_json"),
    ('{"action_type": "send_offer", "payment": 1e400}', 400, "invalid_json"),
    ('{"action_type": "send_offer", "payment": -Infinity}', 400, "invalid_json"),
    ('{"action_type": "send_message", "message": "\\ud800"}', 400, "invalid_json"),
    ('{"action_type": "teleport"}', 422, "invalid_request"),
    ('{"action_type": "wait", "bogus": 1}', 422, "invalid_request"),
    ('{"action_type": "wait", "block_ids": "b_0_0"}', 422, "invalid_request"),
    ('{"action_type": "send_offer", "payment": 1' + "0" * 5000 + "}", 400, "invalid_json"),
    ("not json", 422, "invalid_request"),
    ("[1, 2]", 422, "invalid_request"),
]


@pytest.mark.parametrize(("body", "status", "code"), BAD_BODIES, ids=[f"{s}-{c}-{i}" for i, (_, s, c) in enumerate(BAD_BODIES)])
def test_bad_rest_steps_are_4xx_and_change_nothing(base_url: str, body: str, status: int, code: str) -> None:
    with httpx.Client(base_url=base_url) as http:
        sid = http.post("/api/sessions", json={"task": "market_round", "seed": 4}).json()["session_id"]
        before = http.get(f"/api/sessions/{sid}").json()
        r = http.post(f"/api/sessions/{sid}/step", content=body.encode("utf-8", "surrogatepass"),
                      headers={"content-type": "application/json"})
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text
        assert http.get(f"/api/sessions/{sid}").json() == before  # not half-applied
        after = http.post(f"/api/sessions/{sid}/step", json={"action_type": "wait"})
        assert after.status_code == 200 and after.json()["step_count"] == 1  # still usable
        http.delete(f"/api/sessions/{sid}")


@pytest.mark.parametrize(("action", "code"), [
    ({"action_type": "send_offer", "target_lab_id": "lab_1", "block_ids": [f"b_{i}" for i in range(500)]},
     "list_too_long"),
    ({"action_type": "send_message", "message": "m" * 600}, "message_too_long"),
    ({"action_type": "send_offer", "target_lab_id": "lab_1", "payment": 1.0,
      "conditions": {f"c{i}": True for i in range(50)}}, "conditions_too_large"),
    ({"action_type": "send_offer", "target_lab_id": "lab_1", "payment": 1e300}, "invalid_payment"),
    ({"action_type": "accept_offer", "offer_id": "o_999"}, None),
])
def test_well_typed_but_refused_actions_are_observation_errors(base_url: str, action: dict[str, Any],
                                                               code: str | None) -> None:
    with httpx.Client(base_url=base_url) as http:
        sid = http.post("/api/sessions", json={"task": "market_round", "seed": 4}).json()["session_id"]
        r = http.post(f"/api/sessions/{sid}/step", json=action)
        assert r.status_code == 200
        obs = r.json()["observation"]
        assert obs["last_action_result"]["ok"] is False
        assert code is None or obs["last_action_result"]["code"] == code
        assert obs["reward_breakdown"]["invalid_action_penalty"] == pytest.approx(-0.01)
        assert http.post(f"/api/sessions/{sid}/step", json={"action_type": "wait"}).status_code == 200
        http.delete(f"/api/sessions/{sid}")


def test_bad_reset_arguments_are_422_and_hold_no_slot(base_url: str) -> None:
    with httpx.Client(base_url=base_url) as http:
        open_before = http.get("/api/sessions").json()["active_sessions"]
        for args in ({"task": "chess"}, {"split": "test"}, {"seed": -1}, {"seed": 2**64}, {"seed": "7"},
                     {"seat": "lab_9"}, {"opponents": "nobody"}, {"opponents": ["cooperative"] * 9},
                     {"opponents": {"lab_1": "selfish", "lab_7": "selfish"}}, {"judge_mode": "llm"},
                     {"task": "market_round", "index": 0}, {"index": 3}, {"unknown": 1}, {"episode_id": ""}):
            r = http.post("/api/sessions", json=args)
            assert r.status_code == 422, (args, r.text)
            assert r.json()["error"]["code"] in ("invalid_request", "invalid_reset_arguments")
        assert http.get("/api/sessions").json()["active_sessions"] == open_before


def test_bad_websocket_frames_get_error_frames_and_the_session_goes_on(base_url: str) -> None:
    with _ws(base_url) as ws:
        first = _ask(ws, {"type": "reset", "data": {"task": "single_trade", "seed": 3}})
        assert first["type"] == "observation"
        for frame, code in [
            ("x" * (MAX_BODY + 1), "PAYLOAD_TOO_LARGE"),
            ('{"type": "step", "data": ' + NESTED + "}", "INVALID_JSON"),
            ('{"type": "step", "data": {"action_type": "wait", "metadata": {"x": ' + DEEP + "}}}", "INVALID_JSON"),
            ('{"type": "step", "data": {"action_type": "send_offer", "payment": NaN}}', "INVALID_JSON"),
            ('{"type": "step", "data": {"action_type": "send_message", "message": "\\udfff"}}', "INVALID_JSON"),
            ("[1, 2, 3]", "INVALID_JSON"), ('"step"', "INVALID_JSON"), ("17", "INVALID_JSON"), ("null", "INVALID_JSON"),
            (b"\xff\xfe", "INVALID_JSON"), ("{not json", "INVALID_JSON"),
            ('{"type": "fly"}', "UNKNOWN_TYPE"),
            ('{"type": "step", "data": {"action_type": "teleport"}}', "VALIDATION_ERROR"),
            ('{"type": "step", "data": [1]}', "VALIDATION_ERROR"),
            ('{"type": "reset", "data": {"task": "chess"}}', "EXECUTION_ERROR"),
            ('{"type": "reset", "data": {"self": 1}}', "EXECUTION_ERROR"),
        ]:
            reply = _ask(ws, frame)
            assert reply["type"] == "error" and reply["data"]["code"] == code, (frame[:40], reply)
        # none of it touched the episode: the next step is the episode's first
        step = _ask(ws, {"type": "step", "data": {"action_type": "wait"}})
        assert step["type"] == "observation" and step["data"]["observation"]["round_index"] == 1
        # a binary frame holding a good message is read like a text one
        ws.send(json.dumps({"type": "state"}).encode())
        assert json.loads(ws.recv(timeout=10))["data"]["step_count"] == 1


def test_idle_rest_sessions_expire_with_410(short_lived: str) -> None:
    with httpx.Client(base_url=short_lived) as http:
        sids = [http.post("/api/sessions", json={"seed": i}).json()["session_id"] for i in range(2)]
        assert http.post("/api/sessions", json={"seed": 9}).status_code == 429
        time.sleep(1.0)  # the reaper sweeps every 0.1 s: both slots are free again
        assert http.get("/api/sessions").json()["active_sessions"] == 0
        for sid in sids:
            for r in (http.get(f"/api/sessions/{sid}"), http.post(f"/api/sessions/{sid}/step", json={"action_type": "wait"}),
                      http.delete(f"/api/sessions/{sid}")):
                assert r.status_code == 410 and r.json()["error"]["code"] == "session_expired", r.text
        assert http.post("/api/sessions", json={"seed": 9}).status_code == 201


def test_idle_websocket_session_answers_expired_not_a_stale_episode(short_lived: str) -> None:
    with _ws(short_lived) as ws:
        assert _ask(ws, {"type": "reset", "data": {"seed": 1}})["type"] == "observation"
        time.sleep(0.8)
        step = _ask(ws, {"type": "step", "data": {"action_type": "wait"}})
        assert step["data"]["done"] is True
        assert step["data"]["observation"]["last_action_result"]["code"] == "session_expired"
        again = _ask(ws, {"type": "reset", "data": {"seed": 1}})
        assert again["type"] == "error" and "closed" in again["data"]["message"]


def test_god_view_only_when_the_server_enables_it(base_url: str, short_lived: str) -> None:
    for url, god in ((base_url, False), (short_lived, True)):
        with _ws(url) as ws:
            _ask(ws, {"type": "reset", "data": {"task": "market_round", "seed": 2}})
            world = _ask(ws, {"type": "state"})["data"]["world"]
            assert bool(world) is god
            if god:  # the god view does carry other labs' private job values
                assert {j["owner"] for j in world["jobs"]} >= {"lab_1", "lab_2"}
