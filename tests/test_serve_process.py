"""The launcher `make run` and the Docker image use (``python -m gpu_arena.server.app`` → ``serve``),
as its own process on 127.0.0.1: it starts, answers, plays an episode over REST and stops."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return dict(json.loads(r.read()))


def test_launcher_serves_an_episode(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "GPU_ARENA_DB": str(tmp_path / "arena.db"), "GPU_ARENA_AUTO_EVAL": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "gpu_arena.server.app", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "server exited"
            try:
                assert call(f"{base}/health")["status"] == "healthy"
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer within 60 s"
                time.sleep(0.2)
        opened = call(f"{base}/api/sessions", {"task": "single_trade", "seed": 5})
        sid = opened["session_id"]
        done, steps = False, 0
        while not done:
            out = call(f"{base}/api/sessions/{sid}/step", {"action_type": "wait"})
            done, steps = bool(out["done"]), steps + 1
            assert steps <= 10
        assert out["observation"]["metadata"].get("replay_id")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
