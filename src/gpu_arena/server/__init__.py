"""The GPU Arena server (OpenEnv ``create_app`` + REST sessions). ``gpu_arena.server.app`` builds it.

Importing this package builds nothing; ``from gpu_arena.server.app import create_arena_app, app``.
"""

from .settings import ServerSettings

__all__ = ["ServerSettings"]
