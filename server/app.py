"""OpenEnv-conventional launcher (``openenv.yaml`` names ``server.app:app``).

The arena's app (the server with the dashboard) lives in the package (``gpu_arena.dashboard.app``);
this file only re-exports it, so that
``uvicorn server.app:app`` and ``python -m server.app`` work from the repository root as they do
for every OpenEnv environment.
"""

from gpu_arena.dashboard.app import app, create_arena_app, main

__all__ = ["app", "create_arena_app", "main"]

if __name__ == "__main__":
    main()
