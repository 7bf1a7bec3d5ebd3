"""GpuArenaEnv: the OpenEnv contract, bad input at the wire, and the reward identity end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Observation

from gpu_arena import ArenaAction, ArenaObservation, GpuArenaEnv
from gpu_arena.core.types import REWARD_COLUMNS, TASKS, Action
from gpu_arena.models import observation_from_view
from gpu_arena.policies import make_policy, policy_names


def test_is_an_openenv_environment_with_concurrent_sessions():
    env = GpuArenaEnv()
    assert isinstance(env, Environment)
    assert GpuArenaEnv.SUPPORTS_CONCURRENT_SESSIONS
    assert issubclass(ArenaObservation, Observation)
    assert env.get_metadata().name == "gpu_arena"


def test_reset_and_step_contract_from_the_issue():
    env = GpuArenaEnv()
    obs = env.reset(seed=7, task="coalition_market", split="train")
    assert obs.controlled_lab_id == "lab_0" and obs.round_index == 0 and not obs.done
    assert set(obs.reward_breakdown) == set(REWARD_COLUMNS)
    own = obs.owned_blocks[0].block_id
    theirs = next(b.block_id for b in obs.public_market.blocks if b.owner == "lab_1")
    obs = env.step(ArenaAction(action_type="send_offer", target_lab_id="lab_1", block_ids=[own],
                               requested_block_ids=[theirs], payment=5.0))
    assert obs.last_action_result.ok, obs.last_action_result
    assert obs.round_index == 1
    assert set(obs.reward_breakdown) == set(REWARD_COLUMNS)
    assert -1 <= obs.reward <= 1
    st = env.state
    assert st.world["labs"] and st.world["jobs"] and st.world["blocks"] and st.round_index == 1
    for name in ("round_index", "max_rounds", "controlled_lab_id", "controlled_lab_budget", "controlled_lab_reputation",
                 "private_jobs", "owned_blocks", "public_market", "visible_labs", "active_offers",
                 "active_coalitions", "message_history", "last_action_result", "reward", "reward_breakdown", "done"):
        assert hasattr(obs, name)


@pytest.mark.parametrize("task", TASKS)
def test_episode_return_equals_surplus_over_batna_plus_penalties(task):
    for seed in range(5):
        env = GpuArenaEnv(task=task, opponents="random_valid")
        obs = env.reset(seed=seed)
        driver = make_policy("random_valid", seed=seed, invalid_rate=0.2)
        total, steps = 0.0, 0
        while not obs.done:
            obs = env.step(driver.act(obs))
            total += obs.reward
            steps += 1
        ep = env.episode
        assert ep is not None and steps <= ep.world.max_rounds
        lab = ep.world.labs["lab_0"]
        surplus = ep.potential("lab_0") - ep.world.initial_potential["lab_0"]
        assert total == pytest.approx(surplus / obs.reward_scale + ep.penalties["lab_0"], abs=1e-9)
        assert ep.potential("lab_0") - lab.initial_budget == pytest.approx(
            lab.realized_value - lab.energy_paid + (lab.budget + lab.energy_paid - lab.initial_budget), abs=1e-9)


def test_no_negotiation_earns_its_batna_exactly_without_shocks():
    for seed in range(20):
        env = GpuArenaEnv(task="single_trade")
        obs = env.reset(seed=seed)
        me = make_policy("no_negotiation")
        total = 0.0
        while not obs.done:
            obs = env.step(me.act(obs))
            total += obs.reward
        assert total == pytest.approx(0.0, abs=1e-9)


def test_step_before_reset_and_after_done_are_errors_without_reward():
    env = GpuArenaEnv()
    obs = env.step(ArenaAction(action_type="wait"))
    assert obs.last_action_result.code == "not_reset" and obs.reward == 0.0 and obs.done
    env.reset(seed=1)
    obs = env.step(ArenaAction(action_type="finish"))
    assert obs.done
    last = env.state.model_dump()
    for _ in range(2):
        again = env.step(ArenaAction(action_type="wait"))
        assert again.last_action_result.code == "episode_done" and again.reward == 0.0
    assert env.state.model_dump() == last  # no silent new episode


@pytest.mark.parametrize("raw,code", [
    ("{not json", "malformed_action"),
    ('{"action_type": "launch_rockets"}', "unknown_action_type"),
    ({"action_type": "send_offer", "payment": "lots"}, "invalid_type"),
    ({"action_type": "send_offer", "block_ids": "b_0_0"}, "invalid_type"),
    ({"action_type": "wait", "surprise": 1}, "unknown_field"),
    ({"payment": 3}, "invalid_type"),
    ({"action_type": "send_offer", "target_lab_id": "lab_1", "payment": math.nan}, "invalid_payment"),
    ({"action_type": "send_offer", "target_lab_id": "lab_1", "payment": -1}, "invalid_payment"),
    ({"action_type": "send_offer", "target_lab_id": "lab_1", "payment": 1e6}, "insufficient_budget"),
    ({"action_type": "send_offer", "target_lab_id": "lab_0", "payment": 1}, "self_trade"),
    ({"action_type": "send_message", "message": "x" * 10_000}, "message_too_long"),
    ({"action_type": "reserve_capacity", "job_id": "j_0_0", "block_ids": [f"b{i}" for i in range(500)]}, "list_too_long"),
    ({"action_type": "accept_offer", "offer_id": "o_1"}, "unknown_offer"),
    (None, "malformed_action"),
    (12, "malformed_action"),
    ('{"action_type": "wait", "conditions": ' + "[" * 5000 + "]" * 5000 + "}", "malformed_action"),  # deeper than the stack
    ({"action_type": "send_message", "message": "\ud800"}, "invalid_text"),  # a lone surrogate: no UTF-8 for it
    (Action("reserve_capacity", job_id="j_0_0", block_ids=np.array(["b_0_0", "b_0_1"])), "invalid_type"),  # type: ignore[arg-type]
    (Action("send_offer", target_lab_id="lab_1", payment=1.0, conditions={"no_resale": {"a": [[[]]]}}), "invalid_type"),
])
def test_bad_input_is_a_structured_error_and_a_spent_turn(raw, code):
    env = GpuArenaEnv(task="market_round")
    env.reset(seed=3)
    before = env.state.world
    obs = env.step(raw)
    assert not obs.last_action_result.ok and obs.last_action_result.code == code, obs.last_action_result
    assert obs.reward_breakdown["invalid_action_penalty"] == pytest.approx(-0.01)
    assert obs.round_index == 1  # the turn was spent
    after = env.state.world
    assert [o for o in after["offers"] if o["sender"] == "lab_0"] == []
    assert after["labs"][0]["budget"] == pytest.approx(before["labs"][0]["budget"], abs=1e-9)
    assert [b["owner"] for b in after["blocks"] if b["block_id"] in {x["block_id"] for x in before["blocks"]}] == \
        [b["owner"] for b in before["blocks"]]
    # the session stays usable, and everything it keeps still writes as JSON
    assert env.step(ArenaAction(action_type="wait")).last_action_result.ok
    # the transcript is standard JSON (no NaN, no lone surrogate), as stores and strict parsers need
    assert env.episode is not None and json.dumps(env.episode.transcript, allow_nan=False, ensure_ascii=False
                                                   ).encode("utf-8")
    env.state.model_dump_json()
    obs.model_dump_json()


def test_a_round_reads_no_action_it_cannot_record_and_replays_as_recorded():
    # every lab moves: an unreadable action (an array where the rules expect a list) is that lab's
    # invalid move, recorded as refused, and the others' moves of the round are all applied
    from gpu_arena.core.engine import Episode
    from gpu_arena.core.records import action_from_record

    episode = Episode.new("market_round", "train", 3, controlled=())
    bad = Action("reserve_capacity", job_id="j_0_0", block_ids=np.array(["b_0_0"]))  # type: ignore[arg-type]
    moves = {"lab_0": bad, "lab_1": Action("send_message", message="hello"), "lab_2": Action("wait")}
    report = episode.step(moves)
    assert report.results["lab_0"].code == "invalid_type" and report.results["lab_1"].ok
    record = episode.transcript[-1]["actions"]
    assert record["lab_0"] == {"rejected": "invalid_type", "message": report.results["lab_0"].message}
    assert any(m.text == "hello" for m in episode.world.messages)
    # values standard JSON cannot carry: a refused move is recorded as refused, a taken move keeps
    # the fields the rules read (an unused NaN is left out); the message echoing a lone surrogate is escaped
    odd = {"lab_0": Action("send_offer", target_lab_id="lab_1", payment=math.nan),
           "lab_1": Action("wait", payment=math.inf, message="\udc00"),
           "lab_2": Action("accept_offer", offer_id="o_\ud800")}
    report = episode.step(odd)
    record = episode.transcript[-1]["actions"]
    assert record["lab_0"] == {"rejected": "invalid_payment", "message": report.results["lab_0"].message}
    assert report.results["lab_1"].ok and record["lab_1"] == {"action_type": "wait"}
    assert record["lab_2"]["rejected"] == report.results["lab_2"].code and "\\ud800" in record["lab_2"]["message"]
    json.dumps(episode.transcript, allow_nan=False, ensure_ascii=False).encode("utf-8")
    again = Episode.new("market_round", "train", 3, controlled=())
    for entry in episode.transcript:
        again.step({lid: action_from_record(a) for lid, a in entry["actions"].items()})
    assert again.transcript == episode.transcript and again.returns == episode.returns


def test_dict_and_json_actions_work_like_models():
    env = GpuArenaEnv()
    env.reset(seed=2)
    assert env.step({"action_type": "wait"}).last_action_result.ok
    assert env.step(json.dumps({"action_type": "send_message", "message": "hi"})).last_action_result.ok


def test_observations_cannot_change_the_world():
    env = GpuArenaEnv(task="market_round")
    obs = env.reset(seed=4)
    before = env.state.world
    for part, name in ((obs.owned_blocks[0], "owner"), (obs.private_jobs[0], "value"), (obs.visible_labs[0], "budget")):
        with pytest.raises(AttributeError):  # the nested views are frozen values
            setattr(part, name, 0.0)
    obs.round_index = 99  # the wire model itself is the caller's own
    assert env.state.world == before


def test_same_seed_and_actions_same_transcript_and_fork():
    def run(env: GpuArenaEnv) -> list:
        obs = env.reset(seed=11, task="coalition_market", opponents="random_valid")
        driver = make_policy("random_valid", seed=5)
        out = []
        while not obs.done:
            obs = env.step(driver.act(obs))
            out.append((obs.reward, obs.last_action_result.code))
        return out

    assert run(GpuArenaEnv()) == run(GpuArenaEnv())
    env = GpuArenaEnv(task="market_round", opponents="random_valid")
    env.reset(seed=9)
    env.step(ArenaAction(action_type="wait"))
    fork = env.fork()
    snap = env.snapshot()
    a = [env.step(ArenaAction(action_type="wait")).reward for _ in range(2)]
    b = [fork.step(ArenaAction(action_type="wait")).reward for _ in range(2)]
    env.restore(snap)
    c = [env.step(ArenaAction(action_type="wait")).reward for _ in range(2)]
    assert a == b == c


def test_reset_arguments_are_checked():
    env = GpuArenaEnv()
    for kwargs in ({"task": "poker"}, {"split": "test"}, {"seat": "lab_7"}, {"judge_mode": "oracle"},
                   {"opponents": "nobody"}, {"colour": "red"}):
        with pytest.raises(ValueError):
            env.reset(seed=1, **kwargs)
    with pytest.raises(ValueError):
        env.reset(seed=-1)
    for kwargs in ({"seat": ["lab_0"]}, {"seat": {}}, {"episode_id": 5}):
        with pytest.raises(ValueError):
            env.reset(seed=1, **kwargs)
    obs = env.reset(seed=None)
    assert isinstance(obs.metadata["seed"], int)


def test_any_seat_and_mixed_opponents():
    env = GpuArenaEnv(task="market_round")
    obs = env.reset(seed=5, seat="lab_2", opponents={"lab_0": "random_valid", "lab_1": "wait"})
    assert obs.controlled_lab_id == "lab_2"
    assert all(j.job_id.startswith("j_2_") for j in obs.private_jobs)
    obs = env.step(ArenaAction(action_type="wait"))
    assert obs.round_index == 1


def test_a_broken_opponent_cannot_crash_the_episode():
    class Broken:
        def act(self, observation):
            raise RuntimeError("boom")

    env = GpuArenaEnv(task="single_trade")
    env.reset(seed=1, opponents={"lab_1": Broken()})
    obs = env.step(ArenaAction(action_type="wait"))
    assert obs.last_action_result.ok
    assert env.episode is not None and env.episode.last_results["lab_1"].code == "policy_error"


def test_render_and_registry():
    env = GpuArenaEnv()
    env.reset(seed=3)
    text = env.render()
    assert "Your jobs:" in text and "lab_0" in text
    assert {"wait", "no_negotiation", "random_valid"} <= set(policy_names())
    with pytest.raises(ValueError):
        make_policy("nope")


def test_observation_round_trips_through_json_and_has_a_schema():
    env = GpuArenaEnv(task="coalition_market", opponents="random_valid")
    obs = env.reset(seed=6)
    driver = make_policy("random_valid", seed=1)
    for _ in range(4):
        obs = env.step(driver.act(obs))
        again = ArenaObservation.model_validate_json(obs.model_dump_json())
        assert again == obs
    schema = ArenaObservation.model_json_schema()
    assert {"private_jobs", "owned_blocks", "public_market", "reward_breakdown", "last_action_result"} <= set(
        schema["properties"])
    with pytest.raises(ValueError):
        ArenaObservation.model_validate({"owned_blocks": [{"block_id": 3}]})


def test_the_observation_prices_its_aids_when_read_to_the_eager_numbers():
    # step returns the seat's view with its decision aids priced on first read; read (or
    # serialised) they are the numbers the eager view computes, and it never warns on the wire
    env = GpuArenaEnv(task="coalition_market")
    obs = env.reset(seed=3)
    driver = make_policy("random_valid", seed=3, invalid_rate=0.1)
    steps = 0
    while not obs.done:
        episode = env.episode
        assert episode is not None
        eager = observation_from_view(episode.observe(env.seat, aids=True, lazy=False))
        assert obs.model_dump(exclude={"metadata"}) == eager.model_dump(exclude={"metadata"})
        assert json.loads(obs.model_dump_json())["owned_blocks"] == json.loads(eager.model_dump_json())["owned_blocks"]
        obs = env.step(driver.act(obs))
        steps += 1
    assert steps > 3
