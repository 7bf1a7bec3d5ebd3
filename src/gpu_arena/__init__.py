"""GPU Arena: AI labs bargain, pool and pitch for scarce GPUs before a deadline.

The in-process API::

    from gpu_arena import GpuArenaEnv, ArenaAction
    env = GpuArenaEnv()
    obs = env.reset(seed=7, task="coalition_market", split="train")
    obs = env.step(ArenaAction(action_type="wait"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# first, before any module of this package imports OpenEnv: keeps OpenEnv's unused Gradio UI out
from . import _lean_openenv  # noqa: F401

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .env import GpuArenaEnv
    from .models import ArenaAction, ArenaObservation, ArenaState

_LAZY = {
    "GpuArenaEnv": ("gpu_arena.env", "GpuArenaEnv"),
    "ArenaAction": ("gpu_arena.models", "ArenaAction"),
    "ArenaObservation": ("gpu_arena.models", "ArenaObservation"),
    "ArenaState": ("gpu_arena.models", "ArenaState"),
}


def __getattr__(name: str) -> Any:
    # lazy, so that importing gpu_arena.core never pulls in openenv or pydantic
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'gpu_arena' has no attribute {name!r}")


__all__ = ["ArenaAction", "ArenaObservation", "ArenaState", "GpuArenaEnv", "__version__"]
