"""``GpuArenaEnv`` on the Rust engine answers as on the Python core: every observation, reward,
transcript and metric, through odd moves, a move Rust cannot hold, snapshots and forks."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from helpers_rs import canon
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.core.types import TASKS, Action, RejectedAction
from gpu_arena.env import GpuArenaEnv
from gpu_arena.native.episode import NativeEpisode
from gpu_arena.policies import make_policy


def _obs(o: Any) -> Any:
    d = o.model_dump()
    d["metadata"].pop("episode_id", None)  # drawn afresh by each reset
    d["metadata"].pop("engine", None)  # which engine played: the one thing that differs
    return canon(d)


def play(engine: str, task: str, seed: int, moves: list[Any], judge_mode: str = "none",
         fork_at: int | None = None, opponents: Any = None) -> list[Any]:
    """Everything an episode shows: each observation, then the transcript and the metrics. The
    seat plays ``moves`` while they last, then ``random_valid``; ``fork_at`` continues a fork."""
    env = GpuArenaEnv(task=task, engine=engine, judge_mode=judge_mode, opponents=opponents)
    seen = [_obs(env.reset(seed=seed))]
    policy = make_policy("random_valid", seed=seed)
    moves = list(moves)
    step = 0
    while not env.episode.done:  # type: ignore[union-attr]
        if fork_at is not None and step == fork_at:
            env = env.fork()
        action = moves.pop(0) if moves else policy.act(env.episode.observe(env.seat))  # type: ignore[union-attr]
        seen.append(_obs(env.step(action)))
        step += 1
    assert env.episode is not None
    seen.append(canon(env.episode.transcript))
    seen.append(canon(env.metrics(optimum=1.0)))
    return seen


@pytest.mark.parametrize("task", TASKS)
def test_random_seats_see_the_same_episode(rs: ModuleType, task: str) -> None:
    for seed in range(4):
        assert play("rust", task, seed, []) == play("python", task, seed, [])


@pytest.mark.parametrize("task", TASKS)
def test_random_valid_opponents_play_the_same_in_rust(rs: ModuleType, task: str) -> None:
    mixed = {"lab_1": "random_valid"}  # the others their archetypes
    for seed in range(4):
        assert play("rust", task, seed, [], opponents="random_valid") == \
            play("python", task, seed, [], opponents="random_valid")
        assert play("rust", task, seed, [], opponents=mixed) == play("python", task, seed, [], opponents=mixed)
    env = GpuArenaEnv(task=task, engine="auto", opponents="random_valid")
    env.reset(seed=0)
    assert isinstance(env.episode, NativeEpisode)


def test_judge_mode_plays_the_same(rs: ModuleType) -> None:
    for seed in range(3):
        assert play("rust", "market_round", seed, [], judge_mode="rule") == \
            play("python", "market_round", seed, [], judge_mode="rule")


def test_the_rust_engine_plays_the_default_episode(rs: ModuleType) -> None:
    env = GpuArenaEnv(task="coalition_market", engine="auto")
    env.reset(seed=1)
    assert isinstance(env.episode, NativeEpisode)
    env.step(Action("wait"))
    assert set(env.policies) == set(env.episode.world.labs) - {"lab_0"}


def test_a_move_rust_cannot_hold_hands_the_episode_to_python(rs: ModuleType) -> None:
    huge = Action("send_offer", target_lab_id="lab_1", payment=2**70, block_ids=("b_1",))
    surrogate = Action("send_message", message="\ud800")
    for task in TASKS:
        odd = [Action("wait"), huge, Action("wait"), surrogate]
        assert play("rust", task, 5, odd) == play("python", task, 5, odd)
    env = GpuArenaEnv(task="market_round", engine="rust")
    env.reset(seed=2)
    env.step(huge)
    assert isinstance(env.episode, NativeEpisode) and env.episode.in_python  # the rest is the Python core's


def test_a_seat_bound_to_the_world_plays_the_same(rs: ModuleType) -> None:
    # rule_expert needs the world: reading it moves the episode to Python, which plays on the same
    from gpu_arena.rollout import play_seat

    for task in TASKS:
        got = []
        for engine in ("python", "rust"):
            env = GpuArenaEnv(task=task, engine=engine)
            first = env.reset(seed=4)
            seen = [_obs(first)]
            play_seat(env, make_policy("rule_expert", seed=4), first, on_step=lambda _a, o, seen=seen: seen.append(_obs(o)))
            got.append((seen, canon(env.episode.transcript)))  # type: ignore[union-attr]
        assert got[0] == got[1]


def test_reading_the_state_moves_nothing(rs: ModuleType) -> None:
    env = GpuArenaEnv(task="coalition_market", engine="rust")
    env.reset(seed=2)
    env.step(Action("wait"))
    assert env.state.world["round_index"] == 1
    assert isinstance(env.episode, NativeEpisode) and not env.episode.in_python


def test_a_fork_plays_on_as_the_original_would(rs: ModuleType) -> None:
    for task in TASKS:
        assert play("rust", task, 3, [], fork_at=2) == play("python", task, 3, [])
        assert play("rust", task, 3, [], fork_at=2, opponents="random_valid") == \
            play("python", task, 3, [], opponents="random_valid")


def test_other_opponents_or_a_model_judge_stay_in_python(rs: ModuleType) -> None:
    env = GpuArenaEnv(task="market_round", engine="auto", opponents="rule_expert")
    env.reset(seed=0)
    assert not isinstance(env.episode, NativeEpisode)
    with pytest.raises(ValueError, match="archetypes"):
        GpuArenaEnv(task="market_round", engine="rust", opponents=["archetypes", "rule_expert"]).reset(seed=0)
    with pytest.raises(ValueError, match="unknown engine"):
        GpuArenaEnv(engine="fast")


odd_moves = st.lists(st.one_of(
    st.builds(Action, st.sampled_from(["send_offer", "accept_offer", "counter_offer", "make_pitch", "finish", "wait",
                                       "reserve_capacity", "allocate_to_job", "form_coalition", "send_message"]),
              target_lab_id=st.sampled_from([None, "lab_1", "lab_2", "lab_9", 7]),
              block_ids=st.lists(st.sampled_from(["b_1", "b_2", "b_3", "b_4"]), max_size=3).map(tuple),
              payment=st.one_of(st.none(), st.floats(-1, 1e8), st.integers(0, 100)),
              message=st.one_of(st.none(), st.text(max_size=8))),
    st.builds(RejectedAction, st.just("format_invalid_json"), st.text(max_size=5)),
    st.sampled_from([{"action_type": "wait"}, '{"action_type": "finish"}', "not json", {"payment": "x"}])),
    max_size=6)


@settings(max_examples=20)
@given(task=st.sampled_from(TASKS), seed=st.integers(0, 30), moves=odd_moves)
def test_odd_moves_see_the_same_episode(rs: ModuleType, task: str, seed: int, moves: list[Any]) -> None:
    assert play("rust", task, seed, moves) == play("python", task, seed, moves)


def test_a_refusal_of_a_subclass_keeps_its_code(rs: ModuleType) -> None:
    from gpu_arena.llm import FormatError

    for engine in ("python", "rust"):
        env = GpuArenaEnv(task="single_trade", engine=engine)
        env.reset(seed=1)
        obs = env.step(FormatError("format_no_action", "no tool call"))
        assert (obs.last_action_result.ok, obs.last_action_result.code) == (False, "format_no_action")


def test_a_round_played_in_rust_reports_as_the_python_round(rs: ModuleType) -> None:
    from gpu_arena.core.policy import policy_move
    from gpu_arena.core.worldgen import generate_world

    for task in TASKS:
        native = NativeEpisode(generate_world(task, "train", 6), "lab_0", rs)
        python, policies = native.python_episode(), native.opponent_policies()
        seat = make_policy("random_valid", seed=6)
        while not native.done:
            action = seat.act(python.observe("lab_0"))
            moves = {"lab_0": action, **{lid: policy_move(p, python, lid) for lid, p in policies.items()}}
            expected, got = python.step(moves), native.step_seat("lab_0", action)
            assert canon([got.round_index, got.order, {k: [r.ok, r.code, r.message] for k, r in got.results.items()},
                          got.rewards, got.done]) == \
                canon([expected.round_index, expected.order,
                       {k: [r.ok, r.code, r.message] for k, r in expected.results.items()}, expected.rewards,
                       expected.done])


def test_random_valid_with_malformed_moves_plays_the_same_in_rust(rs: ModuleType) -> None:
    import copy as copying

    from gpu_arena.core.engine import Episode
    from gpu_arena.core.policy import policy_move
    from gpu_arena.core.worldgen import generate_world
    from gpu_arena.policies import make_seat_policy

    for task in TASKS:
        for seed in range(3):
            world = generate_world(task, "train", seed)
            for lab in world.labs.values():
                lab.params["invalid_rate"] = 0.4  # RandomPolicy takes it: every fourth move or so is garbage
            names = {lid: "random_valid" for lid in world.labs if lid != "lab_0"}
            native = NativeEpisode(copying.deepcopy(world), "lab_0", rs, names)
            python = Episode(world, ("lab_0",))
            policies = {lid: make_seat_policy(world, lid, "random_valid") for lid in names}
            while not python.done:
                moves = {"lab_0": Action("wait"), **{lid: policy_move(p, python, lid) for lid, p in policies.items()}}
                python.step(moves)
                native.step_seat("lab_0", Action("wait"))
            assert canon(native.transcript) == canon(python.transcript)
            assert any("rejected" in a or a.get("action_type") == "launch_rockets"
                       for r in python.transcript for a in r["actions"].values()) or task == "single_trade"
