"""A real uvicorn serving the arena on 127.0.0.1 (a free port), and client-side episode drivers.

The server runs in a thread of the test process: the imports are already paid there, and the
sockets, the HTTP/WebSocket protocol stack and the event loop are uvicorn's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from gpu_arena.client import action_payload
from gpu_arena.dashboard.app import create_arena_app
from gpu_arena.env import GpuArenaEnv
from gpu_arena.models import ArenaObservation
from gpu_arena.policies import make_policy
from gpu_arena.server.app import uvicorn_options
from gpu_arena.server.settings import ServerSettings

TASKS = ("single_trade", "market_round", "coalition_market")


@contextmanager
def running_server(settings: ServerSettings) -> Iterator[str]:
    """Serve ``settings``'s app on 127.0.0.1 at a free port; yield its base URL; stop it after."""
    app = create_arena_app(settings)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on",
                            **uvicorn_options(settings))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def settings_for(tmp_path: Any, **changes: Any) -> ServerSettings:
    return ServerSettings(db=str(tmp_path / "arena.db"), **changes)


@dataclass
class Plan:
    """One episode to play: reset arguments and the policy that picks the seat's actions."""

    task: str
    seed: int
    split: str = "train"
    judge_mode: str = "none"
    policy: str = "random_valid"
    reset_args: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.reset_args = {"task": self.task, "seed": self.seed, "split": self.split, "judge_mode": self.judge_mode}


def plans(n: int) -> list[Plan]:
    """``n`` episodes over every task, both splits, both judge modes and two policies, all seeds distinct."""
    return [Plan(TASKS[i % 3], 1000 + i, "train" if i % 2 else "holdout", "rule" if i % 5 == 0 else "none",
                 "rule_expert" if i % 4 == 1 else "random_valid") for i in range(n)]


def driver(plan: Plan) -> Any:
    return make_policy(plan.policy, seed=plan.seed)


def comparable(obs: ArenaObservation) -> dict[str, Any]:
    """An observation minus the per-session ids (episode and replay id) and which engine played
    (a server-side oracle moves its session to the Python core; replayed in-process, the same
    moves stay in Rust), for transcript equality."""
    out = obs.model_dump(mode="json")
    out["metadata"] = {k: v for k, v in out["metadata"].items() if k not in ("episode_id", "replay_id", "engine")}
    return out


def replay_in_process(plan: Plan, actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript (first observation, then one per action) the same actions give in-process."""
    env = GpuArenaEnv()
    transcript = [comparable(env.reset(**plan.reset_args))]
    transcript += [comparable(env.step(a)) for a in actions]
    return transcript


def wire_action(policy: Any, obs: ArenaObservation) -> dict[str, Any]:
    return action_payload(policy.act(obs))
