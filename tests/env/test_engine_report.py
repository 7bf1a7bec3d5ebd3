"""Which engine plays an episode, and why the Python core does (issue 30, item 3), on the
environment's Python side: every reason the Python core plays from the start is named, in the
report, the observations' metadata and the state, and survives forks, snapshots and restores.
(The Rust side is ``tests/native/test_rs_engine_report.py``.)"""

from __future__ import annotations

from typing import Any

import pytest

from gpu_arena import env as env_module
from gpu_arena.core.types import Action
from gpu_arena.env import GpuArenaEnv
from gpu_arena.native.report import (
    ENGINE_PYTHON,
    MODEL_JUDGE,
    NO_RUST,
    PYTHON_OPPONENTS,
    RESTORED,
    START_REASONS,
    EngineReport,
)
from gpu_arena.policies import make_policy


def says(env: GpuArenaEnv, reason: str, rounds: int = 0) -> None:
    want = EngineReport("python", reason, False, rounds)
    assert env.engine_report() == want and env.engine_playing == "python"
    assert env._observe().metadata["engine"] == want.to_dict() == env.state.engine


def test_the_python_engine_says_so_and_why() -> None:
    env = GpuArenaEnv(task="market_round", engine="python")
    assert env.engine_report() is None and env.engine_playing is None and env.state.engine is None
    obs = env.reset(seed=1)
    assert obs.metadata["engine"] == {"playing": "python", "reason": ENGINE_PYTHON, "moved": False, "rust_rounds": 0}
    obs = env.step(Action("wait"))
    assert obs.metadata["engine"]["reason"] == ENGINE_PYTHON
    says(env, ENGINE_PYTHON)
    says(env.fork(), ENGINE_PYTHON)
    other = GpuArenaEnv(task="market_round")
    other.restore(env.snapshot())
    says(other, ENGINE_PYTHON)  # the snapshot's reason, though this environment would play Rust
    bare = {k: v for k, v in env.snapshot().items() if k != "engine"}  # a snapshot made before reports
    other.restore(bare)
    says(other, RESTORED)


def test_every_start_reason_is_named() -> None:
    assert ENGINE_PYTHON in START_REASONS and MODEL_JUDGE in START_REASONS and PYTHON_OPPONENTS in START_REASONS
    env = GpuArenaEnv(task="single_trade", opponents=[make_policy("random_valid", seed=1)])
    env.reset(seed=0)
    says(env, PYTHON_OPPONENTS)
    env = GpuArenaEnv(task="single_trade", opponents="rule_expert")
    env.reset(seed=0)
    says(env, PYTHON_OPPONENTS)

    class Judge:
        name = "stub"

        def judge(self, case: Any) -> Any:
            raise RuntimeError("not asked in these rounds")

    env = GpuArenaEnv(task="single_trade", judge_mode="rule", judge=Judge())
    env.reset(seed=0)
    says(env, MODEL_JUDGE)


def test_no_rust_engine_is_named_with_the_loaders_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env_module, "native_engine", lambda: "the Rust engine is not built here")
    env = GpuArenaEnv(task="single_trade", engine="auto")
    env.reset(seed=0)
    says(env, f"{NO_RUST}: the Rust engine is not built here")
    with pytest.raises(ValueError, match="not built"):
        GpuArenaEnv(engine="rust").reset(seed=0)
