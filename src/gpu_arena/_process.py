"""Stopping a child process the same way everywhere (the first-run evaluation, a test server)."""

from __future__ import annotations

import subprocess
from typing import Any


def end_process(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """Ask ``proc`` to exit (SIGTERM), give it ``grace_s`` seconds, then kill it (SIGKILL) and wait
    up to ``grace_s`` more for it to be reaped. Does nothing to a process that has already exited."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace_s)
