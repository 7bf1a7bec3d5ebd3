"""A Rust-played episode forks, snapshots and restores in Rust (issue 31, item 4): the copy plays
on there, the same moves give the same observations, rewards and transcript as the original and
as the Python core's fork, and playing one copy changes no other."""

from __future__ import annotations

import copy
from types import ModuleType
from typing import Any

import pytest
from helpers_rs import canon
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.core.engine import Episode
from gpu_arena.core.types import TASKS, Action
from gpu_arena.env import GpuArenaEnv
from gpu_arena.native.episode import MOVE_RUST_CANNOT_HOLD, WORLD_READ, NativeEpisode
from gpu_arena.policies import make_policy
from gpu_arena.rollout import play_seat

HUGE = Action("send_offer", target_lab_id="lab_1", payment=2**70, block_ids=("b_1",))  # beyond 64 bits


def _obs(o: Any) -> Any:
    d = o.model_dump()
    d["metadata"].pop("episode_id", None)
    d["metadata"].pop("engine", None)  # which engine plays (compared on its own where it matters)
    return canon(d)


def started(engine: str, task: str, seed: int, steps: int, opponents: Any = None) -> GpuArenaEnv:
    """An environment ``steps`` rounds into ``(task, seed)``, its seat playing ``random_valid``."""
    env = GpuArenaEnv(task=task, engine=engine, opponents=opponents)
    env.reset(seed=seed, episode_id="ep")
    seat = make_policy("random_valid", seed=seed + 100)
    for _ in range(steps):
        assert env.episode is not None and not env.episode.done
        env.step(seat.act(env.episode.observe(env.seat)))
    return env


def standing(env: GpuArenaEnv) -> Any:
    """Everything an environment shows where it stands (nothing it reads moves or changes it)."""
    ep = env.episode
    assert ep is not None
    state = env.state.model_dump(exclude={"engine"})  # which engine plays: checked where it matters
    return canon([_obs(env._observe()), state, ep.transcript, ep.returns, ep.penalties,
                  ep.last_rewards, {k: [r.ok, r.code, r.message] for k, r in ep.last_results.items()}])


def finish(env: GpuArenaEnv, policy: str = "rule_expert") -> Any:
    """Play ``env`` to its end with ``policy`` in its seat: every observation, the transcript, the
    returns and the metrics."""
    seen = [_obs(env._observe())]
    play_seat(env, make_policy(policy, seed=7), on_step=lambda _a, o: seen.append(_obs(o)))
    ep = env.episode
    assert ep is not None and ep.done
    return canon([seen, ep.transcript, ep.returns, ep.penalties, env.metrics(optimum=1.0)])


@pytest.mark.parametrize("task", TASKS)
def test_a_fork_stays_in_rust_and_plays_as_the_original_and_the_python_fork(rs: ModuleType, task: str) -> None:
    for seed in range(3):
        for steps in (0, 1, 2):
            env = started("rust", task, seed, steps)
            fork = env.fork()
            assert env.engine_playing == fork.engine_playing == "rust"
            assert isinstance(fork.episode, NativeEpisode) and fork.episode is not env.episode
            before = standing(env)
            assert standing(fork) == before
            py_fork = started("python", task, seed, steps).fork()
            assert py_fork.engine_playing == "python"
            assert standing(py_fork) == before
            got = finish(fork)
            assert fork.engine_playing == "rust"  # rule_expert reads its view, never the world
            assert standing(env) == before  # playing the fork changed nothing of the original
            assert finish(env) == got == finish(py_fork)


@pytest.mark.parametrize("task", TASKS)
def test_random_valid_opponents_fork_in_rust(rs: ModuleType, task: str) -> None:
    for seed in (3, 4):
        env = started("rust", task, seed, 1, opponents="random_valid")
        fork = env.fork()
        assert fork.engine_playing == "rust"
        py_fork = started("python", task, seed, 1, opponents="random_valid").fork()
        assert finish(fork, "random_valid") == finish(env, "random_valid") == finish(py_fork, "random_valid")


@pytest.mark.parametrize("task", TASKS)
def test_restoring_a_snapshot_twice_gives_two_independent_episodes(rs: ModuleType, task: str) -> None:
    for seed in (0, 5):
        env = started("rust", task, seed, 1)
        snap = env.snapshot()
        assert isinstance(snap["native"], NativeEpisode) and snap["native"] is not env.episode
        before = standing(env)
        first = GpuArenaEnv(task=task, engine="rust")
        first.restore(snap)
        second = GpuArenaEnv(task=task, engine="auto")
        second.restore(snap)
        assert first.engine_playing == second.engine_playing == "rust"
        assert first.episode is not second.episode and first.episode is not snap["native"]
        assert standing(first) == standing(second) == before
        want = finish(first)
        assert standing(second) == before
        assert finish(second) == want
        finish(env)  # the original plays on; restoring it brings it back, in Rust
        env.restore(snap)
        assert env.engine_playing == "rust" and standing(env) == before
        assert finish(env) == want
        # the snapshot a reader of today's keys sees is the same as ever
        py_snap = started("python", task, seed, 1).snapshot()
        assert canon(snap["episode"].transcript) == canon(py_snap["episode"].transcript)
        assert set(snap) - {"native"} == set(py_snap)


def test_an_environment_on_the_python_core_restores_a_rust_snapshot_in_python(rs: ModuleType) -> None:
    env = started("rust", "market_round", 2, 2)
    snap = env.snapshot()
    want = finish(started("rust", "market_round", 2, 2))
    other = GpuArenaEnv(task="market_round", engine="python")
    other.restore(snap)
    assert other.engine_playing == "python" and isinstance(other.episode, Episode)
    assert finish(other) == want


def test_a_fork_copies_the_environments_fields(rs: ModuleType) -> None:
    env = GpuArenaEnv(task="coalition_market", engine="rust", seat="lab_1", judge_mode="rule")
    env.reset(seed=8, episode_id="the-episode")
    env.step(Action("wait"))
    fork = env.fork()
    assert (fork.seat, fork._seed, fork._step_count, fork._episode_id, fork.judge, fork.engine, fork._defaults) == \
        (env.seat, env._seed, env._step_count, env._episode_id, env.judge, env.engine, env._defaults)
    assert fork._defaults is not env._defaults and fork.engine_playing == "rust"
    assert set(fork.policies) == set(env.policies) and "lab_1" not in fork.policies
    assert standing(fork) == standing(env)
    assert GpuArenaEnv(engine="python").engine_playing is None  # nothing plays before reset
    with pytest.raises(RuntimeError):
        GpuArenaEnv(engine="rust").fork()


def test_a_moved_episode_forks_in_python_and_says_why(rs: ModuleType) -> None:
    for task in TASKS:
        env = started("rust", task, 1, 1)
        env.step(HUGE)
        ep = env.episode
        assert isinstance(ep, NativeEpisode) and ep.in_python and ep.moved_reason == MOVE_RUST_CANNOT_HOLD
        assert env.engine_playing == "python"
        fork = env.fork()
        assert fork.engine_playing == "python" and fork.episode.moved_reason == MOVE_RUST_CANNOT_HOLD  # type: ignore[union-attr]
        assert "native" not in env.snapshot()
        py = started("python", task, 1, 1)
        py.step(HUGE)
        before = standing(env)
        got = finish(fork)
        assert standing(env) == before
        assert finish(env) == got == finish(py.fork())
    env = started("rust", "single_trade", 0, 0)
    assert env.episode.moved_reason is None  # type: ignore[union-attr]
    _ = env.episode.world  # type: ignore[union-attr]
    assert env.engine_playing == "python" and env.episode.moved_reason == WORLD_READ  # type: ignore[union-attr]


def test_a_native_episode_deep_copies_as_a_fork(rs: ModuleType) -> None:
    env = started("rust", "market_round", 0, 1)
    ep = env.episode
    assert isinstance(ep, NativeEpisode)
    twin = copy.deepcopy(ep)
    assert isinstance(twin, NativeEpisode) and not twin.in_python
    assert canon(twin.transcript) == canon(ep.transcript) and twin.transcript is not ep.transcript
    twin.step_seat("lab_0", Action("wait"))
    assert twin.rust_rounds == ep.rust_rounds + 1 and len(ep.transcript) == 1


@settings(max_examples=12, deadline=None)
@given(task=st.sampled_from(TASKS), seed=st.integers(0, 40), steps=st.integers(0, 2),
       moves=st.lists(st.sampled_from([Action("wait"), Action("finish"), HUGE,
                                       Action("send_message", target_lab_id="lab_1", message="deal?")]), max_size=3))
def test_forks_played_on_with_any_moves_match_the_python_core(rs: ModuleType, task: str, seed: int, steps: int,
                                                              moves: list[Action]) -> None:
    def go(env: GpuArenaEnv) -> Any:
        seen = []
        for m in moves:
            if env.episode is None or env.episode.done:
                break
            seen.append(_obs(env.step(m)))
        return [seen, finish(env, "random_valid")]

    rust = started("rust", task, seed, steps)
    fork = rust.fork()
    py = started("python", task, seed, steps).fork()
    assert go(fork) == go(rust) == go(py)
