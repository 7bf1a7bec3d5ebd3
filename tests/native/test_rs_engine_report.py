"""No silent slow path (issue 30, item 3): a Rust-played episode says so in its observations'
metadata and its state, stays in Rust for ``state()``, snapshots, restores, forks, reading the world
and building an evaluation row, and says why where it moves to the Python core. A remote
``state()`` leaves a server session in Rust too."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import httpx
import pytest
from helpers_rs import canon

from gpu_arena.core.types import TASKS, Action
from gpu_arena.env import GpuArenaEnv
from gpu_arena.evaluation.runner import episode_result, play_episode
from gpu_arena.native.episode import NativeEpisode, read_world
from gpu_arena.native.report import (
    MOVE_REASONS,
    POLICY_BOUND,
    REPLAYED,
    START_REASONS,
    WORLD_READ,
    EngineReport,
    engine_counts,
    engine_line,
)
from gpu_arena.policies import make_policy
from gpu_arena.rollout import play_seat
from server_helpers import running_server, settings_for


def started(task: str, seed: int, steps: int, engine: str = "rust") -> GpuArenaEnv:
    env = GpuArenaEnv(task=task, engine=engine)
    env.reset(seed=seed)
    seat = make_policy("random_valid", seed=seed)
    for _ in range(steps):
        assert env.episode is not None and not env.episode.done
        env.step(seat.act(env.episode.observe(env.seat)))
    return env


def in_rust(env: GpuArenaEnv, rounds: int) -> None:
    """``env`` plays in Rust, ``rounds`` of its rounds played there, and every face says so."""
    ep = env.episode
    assert isinstance(ep, NativeEpisode) and not ep.in_python and ep.moved_reason is None
    want = EngineReport("rust", None, False, rounds)
    assert env.engine_report() == want and env.engine_playing == "rust"
    assert env._observe().metadata["engine"] == want.to_dict()


@pytest.mark.parametrize("task", TASKS)
def test_state_snapshots_restores_forks_and_reads_leave_a_rust_episode_in_rust(rs: ModuleType, task: str) -> None:
    env = started(task, 2, 2)
    in_rust(env, 2)
    state = env.state
    assert state.engine == {"playing": "rust", "reason": None, "moved": False, "rust_rounds": 2}
    assert state.world and state.round_index == read_world(env.episode).round_index  # type: ignore[arg-type]
    in_rust(env, 2)
    snap = env.snapshot()
    in_rust(env, 2)
    assert snap["engine"] == EngineReport("rust", None, False, 2)
    other = GpuArenaEnv(task=task, engine="rust")
    other.restore(snap)
    in_rust(other, 2)
    fork = env.fork()
    in_rust(fork, 2)
    fork.step(Action("wait"))
    in_rust(fork, 3)
    in_rust(env, 2)  # the fork's round is its own
    _ = env.metrics(optimum=1.0), env.policies, env.render()
    in_rust(env, 2)


def test_the_world_view_is_a_copy_of_its_own(rs: ModuleType) -> None:
    env = started("market_round", 1, 1)
    ep = env.episode
    assert isinstance(ep, NativeEpisode)
    before = canon(env.state.model_dump())
    view = ep.world_view()
    assert view is not ep.world_view()  # every reader gets its own: changing one changes no other
    lab = next(iter(view.labs.values()))
    lab.budget += 1e6
    view.labs.clear()
    view.round_index = 99
    assert canon(env.state.model_dump()) == before
    assert ep.world_view().labs and not ep.in_python
    assert read_world(ep).round_index == env._observe().round_index


@pytest.mark.parametrize("task", TASKS)
def test_an_evaluation_row_records_rust_and_leaves_the_episode_there(rs: ModuleType, task: str) -> None:
    env = GpuArenaEnv(task=task, split="holdout", engine="rust")
    env.reset(seed=4)
    played = play_seat(env, make_policy("rule_expert", seed=4))
    ep = env.episode
    assert isinstance(ep, NativeEpisode) and ep.done
    rounds = ep.rust_rounds
    row = episode_result(env, "rule_expert", task, "holdout", 4, episode_return=played.episode_return,
                         columns=played.columns, steps=played.steps, optimum=1.0, keep_replay=True)
    in_rust(env, rounds)
    assert (row.engine, row.engine_reason) == ("rust", None)
    # the row's values are those the Python core gives
    py = GpuArenaEnv(task=task, split="holdout", engine="python")
    py.reset(seed=4)
    py_played = play_seat(py, make_policy("rule_expert", seed=4))
    py_row = episode_result(py, "rule_expert", task, "holdout", 4, episode_return=py_played.episode_return,
                            columns=py_played.columns, steps=py_played.steps, optimum=1.0, keep_replay=True)
    assert (py_row.engine, py_row.engine_reason) == ("python", "engine='python'")
    same = {k: v for k, v in row.to_dict().items() if k not in ("engine", "engine_reason")}
    assert canon(same) == canon({k: v for k, v in py_row.to_dict().items() if k not in ("engine", "engine_reason")})


def test_a_policy_bound_to_the_world_moves_the_episode_and_says_why(rs: ModuleType) -> None:
    env = started("market_round", 3, 1)
    play_seat(env, make_policy("oracle", seed=3))
    ep = env.episode
    assert isinstance(ep, NativeEpisode) and ep.in_python and ep.moved_reason == POLICY_BOUND
    report = env.engine_report()
    assert report == EngineReport("python", POLICY_BOUND, True, 1) and report.moved_reason == POLICY_BOUND
    assert env._observe().metadata["engine"] == report.to_dict() and env.state.engine == report.to_dict()
    # a fork and a snapshot of the moved episode say the same
    assert env.fork().engine_report() == report
    restored = GpuArenaEnv(task="market_round", engine="rust")
    restored.restore(env.snapshot())
    assert restored.engine_report() == report
    row = play_episode("oracle", "single_trade", "holdout", 0)
    assert (row.engine, row.engine_reason) == ("python", POLICY_BOUND)
    assert (play_episode("rule_expert", "single_trade", "holdout", 0).engine) == "rust"


def test_taking_the_live_world_moves_the_episode_and_says_why(rs: ModuleType) -> None:
    env = started("single_trade", 0, 1)
    _ = env.episode.world  # type: ignore[union-attr]
    assert env.engine_report() == EngineReport("python", WORLD_READ, True, 1)


def test_the_reasons_are_listed_and_counted() -> None:
    assert len(set(MOVE_REASONS)) == len(MOVE_REASONS) and not set(MOVE_REASONS) & set(START_REASONS)
    counts = engine_counts([("rust", None)] * 3 + [("python", POLICY_BOUND), ("python", POLICY_BOUND),
                                                    ("python", "engine='python'")])
    assert counts == {"rust": 3, "python": 3, "python_reasons": {POLICY_BOUND: 2, "engine='python'": 1}}
    assert engine_line(counts) == ("engine: rust (3 episodes), python (3 episodes: policy bound to the world 2, "
                                   "engine='python' 1)")
    assert engine_line(engine_counts([("rust", None)])) == "engine: rust (1 episode), python (0 episodes)"
    report = EngineReport("python", REPLAYED, True, 0)
    assert EngineReport.from_dict(report.to_dict()) == report and EngineReport.from_dict(None) is None


def _remote_engine(http: httpx.Client, sid: str) -> dict[str, Any]:
    state = http.get(f"/api/sessions/{sid}/state")
    assert state.status_code == 200, state.text
    return dict(state.json()["engine"])


@pytest.mark.parametrize("god_view", [False, True])
def test_a_remote_state_leaves_the_session_in_rust(rs: ModuleType, tmp_path: Any, god_view: bool) -> None:
    with running_server(settings_for(tmp_path, god_view=god_view)) as url, httpx.Client(base_url=url) as http:
        created = http.post("/api/sessions", json={"task": "market_round", "seed": 5})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        assert created.json()["observation"]["metadata"]["engine"]["playing"] == "rust"
        steps = 0
        while True:
            engine = _remote_engine(http, sid)
            assert engine == {"playing": "rust", "reason": None, "moved": False, "rust_rounds": steps}
            step = http.post(f"/api/sessions/{sid}/step", json={"action_type": "wait"})
            assert step.status_code == 200, step.text
            steps += 1
            assert step.json()["observation"]["metadata"]["engine"] == {**engine, "rust_rounds": steps}
            if step.json()["done"]:
                break
        assert step.json()["replay_id"]  # recording the finished episode read nothing that moves it
        assert _remote_engine(http, sid)["playing"] == "rust"
        # a server-side oracle is bound to the world: the session moves to Python, and says why
        http.post(f"/api/sessions/{sid}/reset", json={"task": "market_round", "seed": 6})
        auto = http.post(f"/api/sessions/{sid}/autostep", json={"policy": "oracle"})
        assert auto.status_code == 200, auto.text
        assert auto.json()["observation"]["metadata"]["engine"]["reason"] == POLICY_BOUND
        assert _remote_engine(http, sid) == {"playing": "python", "reason": POLICY_BOUND, "moved": True,
                                             "rust_rounds": 0}
