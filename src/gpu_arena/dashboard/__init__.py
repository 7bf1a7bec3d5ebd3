"""The dashboard's backend: the page at ``/`` and the JSON routes it reads — the overview, results
and auto-evaluation (:mod:`.routes`, :mod:`.autoeval`), training runs and pipelines
(:mod:`.pipelines`), replays, forks and Play (:mod:`.replays`), the Reference section
(:mod:`.reference`).

It depends on the session server (:mod:`gpu_arena.server`), never the other way: :mod:`.app` mounts
it on the server's app (the arena's app, which ``gpu-arena serve`` runs); it reads the server's
sessions and the store, and never imports the CLI (import-linter contracts).
"""
