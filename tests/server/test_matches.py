"""Live matches against a real server on 127.0.0.1: remote clients and scripted seats in one episode,
token isolation, the round deadline, conflicts, capacity, expiry and bad input."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gpu_arena.client import action_payload
from gpu_arena.core.engine import Episode
from gpu_arena.core.records import action_from_record
from gpu_arena.core.worldgen import generate_world
from gpu_arena.models import ArenaObservation
from gpu_arena.policies import make_policy
from server_helpers import running_server, settings_for

FIVE_LABS = next(s for s in range(100) if len(generate_world("coalition_market", "train", s).labs) == 5)


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(settings_for(tmp_path_factory.mktemp("matches"), max_sessions=40, model_seats=True)) as url:
        yield url


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def play_seat(url: str, match_id: str, seat: str, token: str, seed: int, errors: list[BaseException]) -> None:
    """A remote client: read the seat, act once per round with a seeded policy, until the end."""
    try:
        policy = make_policy("random_valid", seed=seed)  # well-typed moves: a malformed body is a 422
        with httpx.Client(base_url=url, headers=bearer(token), timeout=30) as client:
            while True:
                state = client.get(f"/api/matches/{match_id}/seats/{seat}").json()
                if state["done"]:
                    return
                if state["acted"]:
                    time.sleep(0.005)
                    continue
                obs = ArenaObservation.model_validate(state["observation"])
                r = client.post(f"/api/matches/{match_id}/seats/{seat}/act", json=action_payload(policy.act(obs)))
                assert r.status_code == 202, r.text
                assert r.json()["round"] == state["round"]
    except BaseException as e:  # reported by the test thread
        errors.append(e)


def replay(record: dict[str, Any]) -> Episode:
    """The stored match stepped again in-process from its transcript."""
    episode = Episode.new(record["task"], record["split"], int(record["seed"]), controlled=())
    episode.controlled = tuple(s for s, k in record["seats"].items() if k == "remote")
    for entry in record["transcript"]:
        episode.step({lab: action_from_record(a) for lab, a in entry["actions"].items()})
    return episode


def play_match(url: str, body: dict[str, Any], seed_base: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    created = httpx.post(f"{url}/api/matches", json=body, timeout=30)
    assert created.status_code == 201, created.text
    match = created.json()
    errors: list[BaseException] = []
    threads = [threading.Thread(target=play_seat, args=(url, match["match_id"], seat, token, seed_base + i, errors))
               for i, (seat, token) in enumerate(sorted(match["tokens"].items()))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    state = httpx.get(f"{url}/api/matches/{match['match_id']}").json()
    assert state["done"] and state["replay_id"]
    record = httpx.get(f"{url}/api/episodes/{state['replay_id']}").json()
    return match, record


def test_three_remote_clients_and_two_scripted_seats_play_a_match_that_replays_in_process(base_url: str) -> None:
    body = {"task": "coalition_market", "seed": FIVE_LABS, "round_timeout_s": 60,
            "seats": {"lab_0": "remote", "lab_1": "remote", "lab_2": "remote", "lab_3": "rule_expert"}}
    match, record = play_match(base_url, body)
    assert set(match["tokens"]) == {"lab_0", "lab_1", "lab_2"} and len(set(match["tokens"].values())) == 3
    assert match["seats"] == {"lab_0": "remote", "lab_1": "remote", "lab_2": "remote", "lab_3": "rule_expert",
                              "lab_4": "archetypes"}
    assert record["seats"] == match["seats"] and record["match_id"] == match["match_id"]
    rounds = record["transcript"]
    assert 1 <= len(rounds) <= generate_world("coalition_market", "train", FIVE_LABS).max_rounds
    # the scripted seats played every round (a seat that finished is left out of the rounds after)
    assert all({"lab_3", "lab_4"} <= set(r["actions"]) for r in rounds)
    again = replay(record)
    assert json.loads(json.dumps(again.transcript)) == rounds
    assert again.returns == pytest.approx(record["returns"], abs=1e-12)


def test_sixteen_concurrent_matches_are_isolated(base_url: str) -> None:
    results: list[tuple[dict[str, Any], dict[str, Any]]] = []
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            body = {"task": "market_round", "seed": 500 + i, "seats": {"lab_0": "remote", "lab_2": "remote"},
                    "round_timeout_s": 60}
            results.append(play_match(base_url, body, seed_base=10 * i))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not errors and len(results) == 16
    assert len({m["match_id"] for m, _ in results}) == 16
    for match, record in results:
        assert record["match_id"] == match["match_id"]
        again = replay(record)
        assert json.loads(json.dumps(again.transcript)) == record["transcript"]


def test_tokens_guard_reading_and_acting_and_no_response_leaks_another_seat(base_url: str) -> None:
    created = httpx.post(f"{base_url}/api/matches", json={
        "task": "market_round", "seed": 3, "seats": {"lab_0": "remote", "lab_1": "remote"}}).json()
    mid, tokens = created["match_id"], created["tokens"]
    seat0 = f"{base_url}/api/matches/{mid}/seats/lab_0"
    assert httpx.get(seat0).status_code == 401
    assert httpx.get(seat0).json()["error"]["code"] == "missing_token"
    assert httpx.get(seat0, headers={"Authorization": "Basic abc"}).status_code == 401
    wrong = httpx.get(seat0, headers=bearer(tokens["lab_1"]))
    assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "wrong_token"
    assert httpx.post(f"{seat0}/act", json={"action_type": "wait"}, headers=bearer(tokens["lab_1"])).status_code == 403
    assert httpx.post(f"{seat0}/act", json={"action_type": "wait"}).status_code == 401
    # a scripted seat has no token at all
    assert httpx.get(f"{base_url}/api/matches/{mid}/seats/lab_2", headers=bearer(tokens["lab_0"])).status_code == 403
    assert httpx.get(f"{base_url}/api/matches/{mid}/seats/lab_9", headers=bearer(tokens["lab_0"])).status_code == 404
    public = httpx.get(f"{base_url}/api/matches/{mid}").json()
    assert public["acted"] == [] and public["waiting_for"] == ["lab_0", "lab_1"]  # the refused acts changed nothing
    own = httpx.get(seat0, headers=bearer(tokens["lab_0"]))
    assert own.status_code == 200 and own.json()["observation"]["controlled_lab_id"] == "lab_0"
    for text in (own.text, json.dumps(public)):
        assert tokens["lab_1"] not in text and (text is own.text or tokens["lab_0"] not in text)
    # lab_0's view holds no other lab's job values
    other_jobs = {j.job_id for j in generate_world("market_round", "train", 3).jobs.values() if j.owner != "lab_0"}
    assert not other_jobs & {j["job_id"] for j in own.json()["observation"]["private_jobs"]}


def test_a_second_action_in_a_round_and_any_after_the_end_conflict(base_url: str) -> None:
    created = httpx.post(f"{base_url}/api/matches", json={
        "task": "single_trade", "seed": 1, "seats": {"lab_0": "remote", "lab_1": "remote"}}).json()
    mid, tokens = created["match_id"], created["tokens"]
    act = f"{base_url}/api/matches/{mid}/seats/lab_0/act"
    first = httpx.post(act, json={"action_type": "wait"}, headers=bearer(tokens["lab_0"]))
    assert first.status_code == 202 and not first.json()["resolved"] and first.json()["waiting_for"] == ["lab_1"]
    second = httpx.post(act, json={"action_type": "finish"}, headers=bearer(tokens["lab_0"]))
    assert second.status_code == 409 and second.json()["error"]["code"] == "already_acted"
    last = httpx.post(f"{base_url}/api/matches/{mid}/seats/lab_1/act", json={"action_type": "wait"},
                      headers=bearer(tokens["lab_1"]))
    assert last.json()["resolved"] and last.json()["round"] == 0
    for seat in ("lab_0", "lab_1"):  # both remote seats finish: the match ends early
        r = httpx.post(f"{base_url}/api/matches/{mid}/seats/{seat}/act", json={"action_type": "finish"},
                       headers=bearer(tokens[seat]))
        assert r.status_code == 202
    assert httpx.get(f"{base_url}/api/matches/{mid}").json()["done"]
    over = httpx.post(act, json={"action_type": "wait"}, headers=bearer(tokens["lab_0"]))
    assert over.status_code == 409 and over.json()["error"]["code"] == "episode_done"


def test_a_round_resolves_at_its_deadline_and_the_late_seat_is_told(base_url: str) -> None:
    created = httpx.post(f"{base_url}/api/matches", json={
        "task": "market_round", "seed": 8, "seats": {"lab_0": "remote", "lab_1": "remote"},
        "round_timeout_s": 0.3}).json()
    mid, tokens = created["match_id"], created["tokens"]
    r = httpx.post(f"{base_url}/api/matches/{mid}/seats/lab_0/act", json={"action_type": "send_message",
                                                                           "message": "anyone?"},
                   headers=bearer(tokens["lab_0"]))
    assert r.status_code == 202 and r.json()["waiting_for"] == ["lab_1"]
    time.sleep(0.6)
    state = httpx.get(f"{base_url}/api/matches/{mid}").json()
    assert state["round"] >= 1
    late = httpx.get(f"{base_url}/api/matches/{mid}/seats/lab_1", headers=bearer(tokens["lab_1"])).json()
    assert late["round"] >= 1 and "without your action" in late["notice"]  # it never acted: it missed the last round
    assert late["observation"]["metadata"]["notice"] == late["notice"]  # the observation says so too
    on_time = httpx.get(f"{base_url}/api/matches/{mid}/seats/lab_0", headers=bearer(tokens["lab_0"])).json()
    assert on_time["observation"]["message_history"][0]["text"] == "anyone?"


def test_bad_requests_are_structured_4xx(base_url: str) -> None:
    post = lambda body: httpx.post(f"{base_url}/api/matches", json=body)  # noqa: E731
    cases = [
        ({"seats": {"lab_7": "remote"}}, 422, "unknown_seat"),
        ({"seats": {"lab_0": "rule_expert"}}, 422, "no_remote_seat"),
        ({"seats": {"lab_0": "remote", "lab_1": "nobody"}}, 422, "invalid_request"),
        ({"seats": {"lab_0": "remote"}, "round_timeout_s": -1}, 422, "invalid_request"),
        ({"seats": {"lab_0": "remote"}, "task": "chess"}, 422, "invalid_request"),
        ({"seats": {"lab_0": "remote"}, "colour": "red"}, 422, "invalid_request"),
    ]
    for body, status, code in cases:
        r = post(body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (body, r.text)
    nan = httpx.post(f"{base_url}/api/matches", content=b'{"seats": {"lab_0": "remote"}, "round_timeout_s": NaN}',
                     headers={"content-type": "application/json"})
    assert nan.status_code in (400, 422) and nan.json()["error"]["code"]  # the payload guard refuses NaN first
    assert httpx.get(f"{base_url}/api/matches/nope").status_code == 404
    created = post({"seats": {"lab_0": "remote"}}).json()
    act = f"{base_url}/api/matches/{created['match_id']}/seats/lab_0/act"
    bad = httpx.post(act, json={"action_type": "teleport"}, headers=bearer(created["tokens"]["lab_0"]))
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
    assert httpx.get(f"{base_url}/api/matches/{created['match_id']}").json()["acted"] == []


def test_matches_share_the_session_cap_and_expire_when_idle(tmp_path: Any) -> None:
    # idle_timeout_s long enough that nothing expires before the capacity checks, even on a busy machine
    with running_server(settings_for(tmp_path, max_sessions=2, idle_timeout_s=2.0, reaper_interval_s=0.1)) as url:
        assert httpx.post(f"{url}/api/sessions", json={"task": "single_trade", "seed": 1}).status_code == 201
        match = httpx.post(f"{url}/api/matches", json={"seats": {"lab_0": "remote"}})
        assert match.status_code == 201
        full = httpx.post(f"{url}/api/matches", json={"seats": {"lab_0": "remote"}})
        assert full.status_code == 429 and full.json()["error"]["code"] == "capacity_reached"
        assert httpx.post(f"{url}/api/sessions", json={"task": "single_trade"}).status_code == 429
        time.sleep(2.5)
        gone = httpx.get(f"{url}/api/matches/{match.json()['match_id']}")
        assert gone.status_code == 410 and gone.json()["error"]["code"] == "match_expired"
        assert httpx.post(f"{url}/api/matches", json={"seats": {"lab_0": "remote"}}).status_code == 201


def test_a_client_cannot_name_a_model_for_the_server_to_run_unless_its_operator_allows(tmp_path: Any) -> None:
    _register_slow_family()
    with running_server(settings_for(tmp_path)) as url:  # the default: no model seats
        for kind in ("llm:openai:m@http://127.0.0.1:9", "llm:hf:/etc", "slowtest:model"):
            r = httpx.post(f"{url}/api/matches", json={"seats": {"lab_0": "remote", "lab_1": kind}})
            assert r.status_code == 422 and r.json()["error"]["code"] == "policy_not_allowed", r.text
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.post(f"{url}/api/matches", json={"seats": {"lab_0": "remote", "lab_1": "rule_expert"}}
                          ).status_code == 201


def test_a_finished_match_frees_its_slot_and_stays_readable(tmp_path: Any) -> None:
    with running_server(settings_for(tmp_path, max_sessions=1)) as url:
        created = httpx.post(f"{url}/api/matches", json={"task": "single_trade", "seats": {"lab_0": "remote"}}).json()
        assert httpx.post(f"{url}/api/matches", json={"seats": {"lab_0": "remote"}}).status_code == 429
        act = f"{url}/api/matches/{created['match_id']}/seats/lab_0/act"
        assert httpx.post(act, json={"action_type": "finish"}, headers=bearer(created["tokens"]["lab_0"])).status_code == 202
        assert httpx.get(f"{url}/api/matches/{created['match_id']}").json()["done"]
        assert httpx.post(f"{url}/api/matches", json={"seats": {"lab_0": "remote"}}).status_code == 201


def test_a_seat_over_a_websocket_gets_each_resolved_round_pushed(base_url: str) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    created = httpx.post(f"{base_url}/api/matches", json={
        "task": "single_trade", "seed": 2, "seats": {"lab_0": "remote", "lab_1": "remote"}}).json()
    mid, tokens = created["match_id"], created["tokens"]
    ws_url = base_url.replace("http://", "ws://") + f"/api/matches/{mid}/seats/lab_0/ws"

    def frame(ws: Any) -> dict[str, Any]:
        return json.loads(ws.recv(timeout=10))

    with connect(ws_url) as ws:  # another seat's token: an error frame, then the socket closes (4403)
        ws.send(json.dumps({"type": "auth", "token": tokens["lab_1"]}))
        assert frame(ws)["data"]["code"] == "wrong_token"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403
    with connect(ws_url) as ws:
        ws.send(json.dumps({"type": "hello"}))
        assert frame(ws)["data"]["code"] == "missing_token"
    with connect(ws_url) as ws:  # a frame that is not JSON is answered, and the socket still serves
        ws.send("not json")
        assert frame(ws)["data"]["code"] == "invalid_json"
        ws.send(json.dumps({"type": "auth", "token": tokens["lab_0"]}))
        assert frame(ws)["type"] == "seat"
        ws.send("{broken")
        assert frame(ws)["data"]["code"] == "invalid_json"
    with connect(ws_url) as ws:
        ws.send(json.dumps({"type": "auth", "token": tokens["lab_0"]}))
        seat = frame(ws)
        assert seat["type"] == "seat" and seat["data"]["round"] == 0 and seat["data"]["seat"] == "lab_0"
        assert seat["data"]["observation"]["controlled_lab_id"] == "lab_0"
        ws.send(json.dumps({"type": "act", "data": {"action_type": "wait"}}))
        accepted = frame(ws)
        assert accepted["type"] == "accepted" and not accepted["data"]["resolved"]
        ws.send(json.dumps({"type": "act", "data": {"action_type": "wait"}}))
        assert frame(ws)["data"]["code"] == "already_acted"
        ws.send(json.dumps({"type": "act", "data": {"action_type": "teleport"}}))
        assert frame(ws)["data"]["code"] == "invalid_request"
        ws.send(json.dumps({"type": "dance"}))
        assert frame(ws)["data"]["code"] == "unknown_frame"
        # the other seat acts over REST: the round resolves and lab_0's socket is told without asking
        r = httpx.post(f"{base_url}/api/matches/{mid}/seats/lab_1/act", json={"action_type": "wait"},
                       headers=bearer(tokens["lab_1"]))
        assert r.json()["resolved"]
        pushed = frame(ws)
        assert pushed["type"] == "seat" and pushed["data"]["round"] == 1 and not pushed["data"]["acted"]
        ws.send(json.dumps({"type": "state"}))
        assert frame(ws)["data"]["round"] == 1


def _register_slow_family() -> None:
    """``slowtest:<anything>``: a model-like seat (a family) whose every move takes 0.6 s, once per process."""
    from gpu_arena.policies import register_policy_family

    with contextlib.suppress(ValueError):  # another test of this module registered it
        register_policy_family("slowtest", lambda spec, **params: _SlowPolicy(**params))


class _SlowPolicy:
    """A stand-in for a model behind an endpoint: each move takes a while."""

    def __init__(self, **_params: Any) -> None:
        pass

    def act(self, observation: Any) -> Any:
        time.sleep(0.6)
        return {"action_type": "wait"}


def test_a_model_seat_resolves_off_the_event_loop(base_url: str) -> None:
    _register_slow_family()
    created = httpx.post(f"{base_url}/api/matches", json={
        "task": "single_trade", "seed": 5, "seats": {"lab_0": "remote", "lab_1": "slowtest:model"}})
    assert created.status_code == 201, created.text
    mid, token = created.json()["match_id"], created.json()["tokens"]["lab_0"]
    done: dict[str, float] = {}

    def act() -> None:
        httpx.post(f"{base_url}/api/matches/{mid}/seats/lab_0/act", json={"action_type": "wait"},
                   headers=bearer(token), timeout=30)
        done["act"] = time.monotonic()

    t0 = time.monotonic()
    thread = threading.Thread(target=act)
    thread.start()
    time.sleep(0.15)  # the round is resolving now: the model seat takes 0.6 s
    health = httpx.get(f"{base_url}/health", timeout=30)
    answered = time.monotonic()
    thread.join(timeout=30)
    assert health.status_code == 200 and answered - t0 < 0.55  # the server answered others meanwhile
    assert done["act"] - t0 >= 0.6  # the act returned once its round was played
    state = httpx.get(f"{base_url}/api/matches/{mid}").json()
    assert state["round"] == 1 and state["waiting_for"] == ["lab_0"]


def test_the_match_client_plays_two_seats_to_the_end(base_url: str) -> None:
    from gpu_arena.match_client import MatchError, MatchSeat

    match_id, seats = MatchSeat.create(base_url, task="market_round", seed=12,
                                       seats={"lab_0": "remote", "lab_1": "remote", "lab_2": "rule_expert"})
    assert set(seats) == {"lab_0", "lab_1"}
    assert seats["lab_0"].observe().controlled_lab_id == "lab_0"
    finals: dict[str, dict[str, Any]] = {}
    threads = [threading.Thread(target=lambda s=s: finals.update({s.seat: s.play(make_policy("random_valid", seed=3))}))
               for s in seats.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert finals["lab_0"]["done"] and finals["lab_1"]["replay_id"]
    with pytest.raises(MatchError) as refused:
        seats["lab_0"].act({"action_type": "wait"})
    assert (refused.value.status, refused.value.code) == (409, "episode_done")
    with MatchSeat(base_url, match_id, "lab_1", "not-the-token") as stranger, pytest.raises(MatchError) as wrong:
        stranger.observe()
    assert (wrong.value.status, wrong.value.code) == (403, "wrong_token")
    for s in seats.values():
        s.close()
