"""OpenEnv-conventional launcher (``openenv.yaml`` names ``server.app:app``).

The server lives in the package (``gpu_arena.server.app``); this file only re-exports it, so that
``uvicorn server.app:app`` and ``python -m server.app`` work from the repository root as they do
for every OpenEnv environment.
"""

from gpu_arena.server.app import app, create_arena_app, main

__all__ = ["app", "create_arena_app", "main"]

if __name__ == "__main__":
    main()
