"""The PettingZoo API: PettingZoo's own API and seed tests, per-lab rewards that telescope like the
core's, seats left out wait, actions in every wire form, and errors before anything is applied."""

from __future__ import annotations

import json
import math
import warnings

import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from gpu_arena.core.engine import Episode
from gpu_arena.core.policy import RandomPolicy
from gpu_arena.core.records import action_from_record
from gpu_arena.core.types import REWARD_COLUMNS, TASKS, Action
from gpu_arena.core.views import SeatView
from gpu_arena.models import ArenaAction
from gpu_arena.pettingzoo import GpuArenaParallelEnv, parallel_env


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("observation_format", ["view", "json", "text"])
def test_pettingzoos_own_api_and_seed_tests_pass(task: str, observation_format: str) -> None:
    with warnings.catch_warnings():
        # its API test passes a junk reset option ({"options": 1}), which the env names and ignores
        warnings.filterwarnings("ignore", message="gpu_arena ignores reset options")
        # coalition_market worlds have 4 or 5 labs: lab_4 is absent from the 4-lab ones
        warnings.filterwarnings("ignore", message="No agents present but not all possible_agents")
        parallel_api_test(parallel_env(task=task, observation_format=observation_format), num_cycles=40)
    parallel_seed_test(lambda: parallel_env(task=task, observation_format=observation_format), num_cycles=40)


def play_random(env: GpuArenaParallelEnv, seed: int) -> tuple[dict[str, float], list[dict[str, object]]]:
    """Every lab played by a random policy on its own view; the returns per lab and the steps."""
    obs, _infos = env.reset(seed=seed)
    policies = {lab: RandomPolicy(seed * 10 + i, invalid_rate=0.2) for i, lab in enumerate(env.agents)}
    returns = dict.fromkeys(env.agents, 0.0)
    steps = []
    while env.agents:
        actions = {lab: policies[lab].act(obs[lab]) for lab in env.agents}
        obs, rewards, terminations, truncations, infos = env.step(actions)
        for lab, r in rewards.items():
            returns[lab] += r
            assert set(infos[lab]["reward_breakdown"]) == set(REWARD_COLUMNS)
            assert math.isclose(math.fsum(v for c, v in infos[lab]["reward_breakdown"].items()
                                          if c != "normalized_reward"), r, abs_tol=1e-9)
        assert not any(truncations.values())
        steps.append({"actions": actions, "rewards": rewards, "done": all(terminations.values())})
    return returns, steps


@pytest.mark.parametrize("task", TASKS)
def test_each_lab_gets_its_own_telescoping_reward_and_the_core_replays_it(task: str) -> None:
    env = parallel_env(task=task)
    returns, steps = play_random(env, seed=3)
    episode = env.episode
    assert episode is not None and episode.done and steps[-1]["done"]
    for lab, total in returns.items():
        assert total == pytest.approx(episode.returns[lab], abs=1e-9)
        # the reward's contract: (final utility − BATNA) / scale plus the penalties
        surplus = episode.potential(lab) - episode.world.initial_potential[lab]
        assert total == pytest.approx(surplus / episode.world.reward_scale[lab] + episode.penalties[lab], abs=1e-6)
    # the same actions stepped in the core (its transcript records them) give the same rewards
    replay = Episode.new(task, "train", 3, controlled=())
    replay.controlled = tuple(replay.world.labs)
    for entry in episode.transcript:
        report = replay.step({lab: action_from_record(a) for lab, a in entry["actions"].items()})
        assert {lab: round(r["normalized_reward"], 12) for lab, r in report.rewards.items()} == entry["rewards"]
    assert replay.returns == episode.returns


def test_observations_are_each_labs_own_view_in_every_format() -> None:
    env = parallel_env(task="market_round")
    obs, infos = env.reset(seed=5)
    assert env.agents == ["lab_0", "lab_1", "lab_2"] and infos["lab_0"]["seed"] == 5
    for lab, view in obs.items():
        assert isinstance(view, SeatView) and view.controlled_lab_id == lab
        assert env.observation_space(lab).contains(view)
        assert not env.observation_space("lab_0" if lab != "lab_0" else "lab_1").contains(view)
    as_json = parallel_env(task="market_round", observation_format="json").reset(seed=5)[0]
    wire = json.loads(as_json["lab_1"])
    assert wire["controlled_lab_id"] == "lab_1" and wire["batna"] == pytest.approx(obs["lab_1"].batna)
    as_text = parallel_env(task="market_round", observation_format="text").reset(seed=5)[0]
    assert "you are lab_2" in as_text["lab_2"]


def test_actions_in_every_wire_form_and_seats_left_out_wait() -> None:
    env = parallel_env(task="single_trade")
    env.reset(seed=1)
    _obs, rewards, _term, _trunc, infos = env.step({
        "lab_0": json.dumps({"action_type": "wait"}),
        "lab_1": ArenaAction(action_type="send_message", message="hello"),
    })
    assert infos["lab_0"]["result"]["ok"] and infos["lab_1"]["result"]["ok"]
    _obs, rewards, _term, _trunc, infos = env.step({"lab_0": Action("wait")})  # lab_1 left out: it waits
    assert infos["lab_1"]["result"]["ok"] and infos["lab_1"]["result"]["code"] == "ok"
    assert env.episode is not None and env.episode.transcript[-1]["actions"]["lab_1"] == {"action_type": "wait"}
    assert rewards["lab_1"] == pytest.approx(infos["lab_1"]["reward_breakdown"]["normalized_reward"])


@pytest.mark.parametrize(("bad", "code"), [
    ("{not json", "malformed_action"), ({"action_type": "teleport"}, "unknown_action_type"),
    ({"action_type": "wait", "colour": "red"}, "unknown_field"), ({"action_type": "send_offer", "payment": "x"},
                                                                  "invalid_type"),
    (42, "malformed_action"), ({"action_type": "accept_offer", "offer_id": "o_999"}, None),
    ('{"action_type": "wait", "conditions": ' + "[" * 5000 + "]" * 5000 + "}", "malformed_action"),
    ({"action_type": "send_message", "message": "\udfff"}, "invalid_text"),
])
def test_a_bad_action_is_that_labs_invalid_move_never_an_exception(bad: object, code: str | None) -> None:
    env = parallel_env(task="single_trade")
    env.reset(seed=2)
    _obs, _rewards, _term, _trunc, infos = env.step({"lab_0": bad, "lab_1": {"action_type": "wait"}})
    result = infos["lab_0"]["result"]
    assert not result["ok"] and (code is None or result["code"] == code)
    assert infos["lab_0"]["reward_breakdown"]["invalid_action_penalty"] < 0
    assert infos["lab_1"]["result"]["ok"] and infos["lab_1"]["reward_breakdown"]["invalid_action_penalty"] == 0


def test_errors_before_reset_after_the_end_and_for_unknown_agents_apply_nothing() -> None:
    env = parallel_env(task="single_trade")
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"lab_0": {"action_type": "wait"}})
    env.reset(seed=4)
    before = [dict(e) for e in env.episode.transcript] if env.episode else []
    with pytest.raises(ValueError, match="lab_9"):
        env.step({"lab_0": {"action_type": "wait"}, "lab_9": {"action_type": "wait"}})
    with pytest.raises(ValueError, match="mapping"):
        env.step([("lab_0", {"action_type": "wait"})])  # type: ignore[arg-type]
    assert env.episode is not None and env.episode.transcript == before and env.episode.world.round_index == 0
    while env.agents:
        env.step({})
    with pytest.raises(RuntimeError, match="over"):
        env.step({})
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-1)
    with pytest.raises(ValueError, match="task"):
        parallel_env(task="nope")
    with pytest.raises(ValueError, match="unknown options"):
        parallel_env(task="single_trade", colour="red")
    for options in (["task"], "task"):
        with pytest.raises(ValueError, match="mapping"):
            env.reset(seed=1, options=options)  # type: ignore[arg-type]


def test_unseeded_resets_follow_the_last_seed_and_options_change_the_task() -> None:
    a, b = parallel_env(task="single_trade"), parallel_env(task="single_trade")
    a.reset(seed=11)
    b.reset(seed=11)
    assert [a.reset()[1]["lab_0"]["seed"] for _ in range(3)] == [b.reset()[1]["lab_0"]["seed"] for _ in range(3)]
    obs, _ = a.reset(seed=1, options={"task": "coalition_market", "split": "holdout"})
    assert a.possible_agents == [f"lab_{i}" for i in range(5)] and len(a.agents) in (4, 5)
    assert obs["lab_0"].task == "coalition_market" and obs["lab_0"].split == "holdout"


def test_render_modes() -> None:
    env = parallel_env(task="single_trade", render_mode="ansi")
    assert env.render() == "(not reset)"
    env.reset(seed=0)
    text = env.render()
    assert text is not None and "you are lab_0" in text and "you are lab_1" in text
    with pytest.raises(ValueError, match="render_mode"):
        parallel_env(render_mode="rgb_array")
