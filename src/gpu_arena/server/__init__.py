"""The GPU Arena server (OpenEnv ``create_app`` + REST sessions and live matches).
``gpu_arena.server.app.create_server_app`` builds it; what else is served mounts itself on it as an
extension (the dashboard: ``gpu_arena.dashboard.app`` builds the arena's app). The server never
imports the dashboard.

Importing this package builds nothing.
"""

from .settings import ServerSettings

__all__ = ["ServerSettings"]
