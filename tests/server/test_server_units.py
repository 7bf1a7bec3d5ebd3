"""Server pieces without a server: settings, the manifest, reset arguments, session expiry, the JSON gate."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from gpu_arena.core import engine
from gpu_arena.core.types import COMPONENT_COLUMNS, TASKS
from gpu_arena.server.environment import ResetArgs, ServedArenaEnv, parse_reset_args
from gpu_arena.server.errors import CapacityReached, InvalidResetArguments, SessionGone, SessionNotFound
from gpu_arena.server.guard import inspect_json
from gpu_arena.server.sessions import SessionManager
from gpu_arena.server.settings import ServerSettings

ROOT = Path(__file__).resolve().parents[2]


def test_settings_read_the_environment_and_refuse_nonsense() -> None:
    s = ServerSettings.from_env({"GPU_ARENA_PORT": "9001", "GPU_ARENA_GOD_VIEW": "yes", "GPU_ARENA_MAX_SESSIONS": "3",
                                 "GPU_ARENA_IDLE_TIMEOUT_S": "2.5", "GPU_ARENA_DB": ""}, host="0.0.0.0")
    assert (s.host, s.port, s.god_view, s.max_sessions, s.idle_timeout_s, s.db) == ("0.0.0.0", 9001, True, 3, 2.5, None)
    defaults = ServerSettings.from_env({})
    assert (defaults.host, defaults.port, defaults.max_sessions, defaults.god_view) == ("127.0.0.1", 8000, 64, False)
    for bad in ({"GPU_ARENA_PORT": "http"}, {"GPU_ARENA_GOD_VIEW": "maybe"}, {"GPU_ARENA_MAX_SESSIONS": "0"},
                {"GPU_ARENA_PORT": "70000"}, {"GPU_ARENA_IDLE_TIMEOUT_S": "-1"}):
        with pytest.raises(ValueError, match=r"GPU_ARENA|must"):
            ServerSettings.from_env(bad)


def test_manifest_matches_the_engine() -> None:
    manifest = yaml.safe_load((ROOT / "openenv.yaml").read_text())
    assert manifest["app"] == "server.app:app" and manifest["validation"]["reward"]["range"] == [-1.0, 1.0]
    assert manifest["reward_columns"]["components"] == list(COMPONENT_COLUMNS)
    pen = manifest["reward_columns"]["penalties"]
    assert pen["invalid_action_penalty"] == {"each": -engine.PENALTY_INVALID, "cap": -engine.PENALTY_INVALID}
    assert pen["spam_penalty"] == {"each": -engine.PENALTY_SPAM, "cap": -engine.SPAM_CAP}
    assert pen["breach_penalty"] == {"each": -engine.PENALTY_BREACH, "cap": -engine.BREACH_CAP}
    assert [t["name"] for t in manifest["tasks"]] == list(TASKS)
    assert manifest["validation"]["capabilities"]["declared_task_count"] == {"train": len(TASKS), "holdout": len(TASKS)}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"EXPOSE {manifest['port']}" in dockerfile


def test_reset_arguments() -> None:
    assert parse_reset_args({"index": 2}).task == "coalition_market"
    assert ResetArgs().env_kwargs()["task"] == "single_trade"
    assert parse_reset_args({"opponents": {"lab_1": "selfish"}}).opponents == {"lab_1": "selfish"}
    for bad in ({"seed": True}, {"seed": 1.5}, {"opponents": []}, {"seat": "lab_0; drop"}, {"opponents": "x" * 100}):
        with pytest.raises(InvalidResetArguments):
            parse_reset_args(bad)
    env = ServedArenaEnv()
    with pytest.raises(InvalidResetArguments, match="unknown seat"):
        env.reset(seat="lab_4", task="single_trade", seed=1)
    assert env.episode is None  # nothing half-done


def test_served_env_closes_for_good() -> None:
    env = ServedArenaEnv()
    env.reset(seed=1)
    env.close()
    assert env.step({"action_type": "wait"}).last_action_result.code == "session_expired"
    with pytest.raises(SessionGone):
        env.reset(seed=1)
    with pytest.raises(SessionGone):
        _ = env.state


def test_session_manager_caps_expires_and_remembers() -> None:
    now = [0.0]
    manager = SessionManager(ServerSettings(max_sessions=2, idle_timeout_s=10, tombstones=2), ServedArenaEnv,
                             clock=lambda: now[0])
    a, b = manager.create(), manager.create()
    with pytest.raises(CapacityReached):
        manager.create()
    now[0] = 5
    asyncio.run(manager.run(a.session_id, lambda env: env.reset(seed=1)))  # a is active at t=5, b idle since 0
    now[0] = 12
    assert manager.expire_idle() == [b.session_id]
    with pytest.raises(SessionGone) as gone:
        asyncio.run(manager.run(b.session_id, lambda env: None))
    assert gone.value.code == "session_expired"
    asyncio.run(manager.close(a.session_id))
    with pytest.raises(SessionGone) as closed:
        asyncio.run(manager.run(a.session_id, lambda env: None))
    assert closed.value.code == "session_closed"
    manager.create()
    c = manager.create()
    asyncio.run(manager.close(c.session_id))  # the oldest tombstone (b) is forgotten
    with pytest.raises(SessionNotFound):
        asyncio.run(manager.run(b.session_id, lambda env: None))


@pytest.mark.parametrize(("text", "ok"), [
    ('{"a": [1, 2.5, "x"]}', True), ('{"a": NaN}', False), ('{"a": Infinity}', False), ("[1e999]", False),
    ('{"a": "\\ud83d\\ude00"}', True), ('{"a": "\\ud83d"}', False), ('{"\\udc00": 1}', False),
    ("[" * 40 + "]" * 40, False), ("[" * 20 + "]" * 20, True), ("1" * 30, False), ("not json", True),
])
def test_json_gate(text: str, ok: bool) -> None:
    _value, problem = inspect_json(text, max_depth=32)
    assert (problem is None) is ok, problem


def test_serve_command_refuses_bad_settings() -> None:
    from typer.testing import CliRunner

    from gpu_arena.cli import app

    result = CliRunner().invoke(app, ["serve"], env={"GPU_ARENA_MAX_SESSIONS": "many"})
    assert result.exit_code == 2 and "GPU_ARENA_MAX_SESSIONS" in result.output
