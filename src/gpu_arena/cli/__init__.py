"""The ``gpu-arena`` command (typer and rich): the app and its console script (:mod:`.app`), one
module per family of commands — :mod:`.play` (demo, play), :mod:`.evaluate` (eval, report, replay),
:mod:`.info` (tasks, schema, policies), :mod:`.serve`, :mod:`.data`, :mod:`.train` (with its option
checks in :mod:`.train_checks`), :mod:`.runs`, :mod:`.league` — and what they share: option values
(:mod:`.options`), the terminal (:mod:`.console`) and the evaluation tables (:mod:`.eval_tables`).

Nothing else in the package imports the CLI (import-linter contracts); each command loads what it
needs (the environment, evaluation, the training stack) inside itself, so ``gpu-arena --help`` stays
fast. ``python -m gpu_arena.cli`` runs the command.
"""

from .app import app, main

__all__ = ["app", "main"]
