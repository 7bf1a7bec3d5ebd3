"""The command `make run` and the Docker image run (``gpu-arena serve``), as its own process on
127.0.0.1: it starts, answers, plays an episode over REST to its replay id, and stops."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gpu_arena._process import end_process

GPU_ARENA = shutil.which("gpu-arena", path=str(Path(sys.executable).parent)) or shutil.which("gpu-arena")


def call(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return dict(json.loads(r.read()))


@pytest.mark.skipif(GPU_ARENA is None, reason="the gpu-arena command is not installed")
def test_gpu_arena_serve_plays_an_episode(tmp_path: Path) -> None:
    assert GPU_ARENA is not None
    log = tmp_path / "serve.log"
    env = {**os.environ, "GPU_ARENA_DB": str(tmp_path / "arena.db")}
    # port 0: the system picks a free port (no race with other tests); uvicorn logs the one it got
    with log.open("wb") as out, subprocess.Popen(
            [GPU_ARENA, "serve", "--no-auto-eval", "--host", "127.0.0.1", "--port", "0"],
            env=env, stdout=out, stderr=subprocess.STDOUT) as proc:
        try:
            deadline = time.monotonic() + 90
            port = None
            while port is None:
                assert proc.poll() is None, f"the server exited: {log.read_text()}"
                assert time.monotonic() < deadline, f"the server did not start within 90 s: {log.read_text()}"
                found = re.search(r"running on http://127\.0\.0\.1:(\d+)", log.read_text())
                port = int(found.group(1)) if found else None
                time.sleep(0.2)
            base = f"http://127.0.0.1:{port}"
            assert call(f"{base}/health")["status"] == "healthy"
            sid = call(f"{base}/api/sessions", {"task": "single_trade", "seed": 5})["session_id"]
            for _ in range(10):
                out_step = call(f"{base}/api/sessions/{sid}/step", {"action_type": "wait"})
                if out_step["done"]:
                    break
            assert out_step["done"] and out_step["observation"]["metadata"].get("replay_id")
        finally:
            end_process(proc, grace_s=30)
