"""Fuzz the live server: every REST operation from its OpenAPI schema (schemathesis) and the
WebSocket protocol (hypothesis). No input may produce a 5xx or end a session; sessions opened
before the fuzzing are still usable after it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from websockets.sync.client import connect

from gpu_arena.dashboard.app import create_arena_app
from gpu_arena.server.settings import ServerSettings
from server_helpers import running_server, settings_for

# the schema of the app under test, read from the app itself (no server needed to collect tests)
schema = schemathesis.openapi.from_dict(create_arena_app(ServerSettings(store_episodes=False)).openapi())


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # small caps, so that the fuzzer also runs into the capacity and size limits
    settings = settings_for(tmp_path_factory.mktemp("fuzz"), max_sessions=8, max_body_bytes=16384)
    with running_server(settings) as url, httpx.Client(base_url=url) as http:
        sid = http.post("/api/sessions", json={"task": "market_round", "seed": 1}).json()["session_id"]
        yield url, sid
        # the session opened before the fuzzing still plays
        r = http.post(f"/api/sessions/{sid}/step", json={"action_type": "wait"})
        assert r.status_code == 200, r.text


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_rest_api_never_answers_5xx(case: schemathesis.Case, live: tuple[str, str]) -> None:
    url, sid = live
    if case.path_parameters and "session_id" in case.path_parameters and case.method != "DELETE":
        # aim the fuzzed bodies at a live session (random ids would only ever meet a 404)
        case.path_parameters["session_id"] = sid
    case.call_and_validate(base_url=url, checks=[not_a_server_error])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=25)
action_fields = st.fixed_dictionaries({}, optional={
    "action_type": st.sampled_from(["send_offer", "accept_offer", "wait", "finish", "send_message", "teleport"]) | json_values,
    "target_lab_id": st.sampled_from(["lab_0", "lab_1", "lab_9"]) | json_values,
    "block_ids": st.lists(st.sampled_from(["b_0_0", "b_1_0", "x"]), max_size=20) | json_values,
    "payment": st.floats() | st.integers(-10, 10**30) | json_values,
    "message": st.text(max_size=700) | json_values,
    "conditions": st.dictionaries(st.text(max_size=20), json_values, max_size=6) | json_values,
    "expires_in": st.integers(-5, 2**70) | json_values,
    "bogus": json_values,
})
reset_data = st.fixed_dictionaries({}, optional={
    "task": st.sampled_from(["single_trade", "coalition_market", "chess"]) | json_values,
    "seed": st.integers(-5, 2**65) | json_values, "split": st.sampled_from(["train", "holdout"]) | json_values,
    "seat": st.sampled_from(["lab_0", "lab_1", "lab_6"]) | json_values,
    "opponents": st.sampled_from(["random_valid", "selfish", "nope"]) | json_values, "self": json_values,
})
frames = st.one_of(
    st.builds(lambda d: {"type": "reset", "data": d}, reset_data),
    st.builds(lambda d: {"type": "step", "data": d}, action_fields),
    st.builds(lambda t, d: {"type": t, "data": d}, st.sampled_from(["reset", "step", "state", "mcp", "fly"]), json_values),
    json_values,
).map(lambda m: json.dumps(m)) | st.text(max_size=200) | st.binary(max_size=50)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(script=st.lists(frames, min_size=1, max_size=8))
def test_websocket_messages_never_break_the_session(live: tuple[str, str], script: list[Any]) -> None:
    url, _ = live
    with connect(url.replace("http", "ws") + "/ws", max_size=None) as ws:
        for frame in script:
            ws.send(frame)
            reply = json.loads(ws.recv(timeout=10))
            assert reply["type"] in ("observation", "state", "error", "mcp"), reply
            if reply["type"] == "error":
                assert reply["data"]["code"] and reply["data"]["message"]
        # whatever came before, the session resets and steps
        ws.send(json.dumps({"type": "reset", "data": {"task": "single_trade", "seed": 0}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        ws.send(json.dumps({"type": "step", "data": {"action_type": "wait"}}))
        assert json.loads(ws.recv(timeout=10))["data"]["observation"]["round_index"] == 1
