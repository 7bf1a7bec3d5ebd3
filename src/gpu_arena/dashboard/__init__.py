"""The dashboard's backend: the page at ``/`` and the JSON routes it reads — the overview, results
and auto-evaluation (:mod:`.routes`, :mod:`.autoeval`), training runs and pipelines
(:mod:`.pipelines`), replays, forks and Play (:mod:`.replays`), the Reference section
(:mod:`.reference`).

It sits beside the session server (:mod:`gpu_arena.server`), whose app mounts it; it reads the
server's sessions and the store, and never imports the CLI (an import-linter contract).
"""
