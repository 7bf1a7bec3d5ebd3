"""Whether a run is CI's, and what a twin out of step does to the tests: fail under CI, warn (and
skip) elsewhere."""

from __future__ import annotations

import os
import warnings

import pytest


def under_ci() -> bool:
    """Whether this run is CI's: ``$CI`` set to anything but empty, 0, false or no."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_level(problems: list[str], *, ci: bool | None = None, skip: bool = True) -> None:
    """Fail under CI where the twin is out of step (``problems``, from
    :func:`gpu_arena.native.build.twin_problems`, each naming a module or file); elsewhere warn,
    naming them, and (``skip``) skip."""
    if not problems:
        return
    text = "the Rust twin is out of step with the Python core:\n  " + "\n  ".join(problems)
    if under_ci() if ci is None else ci:
        pytest.fail(text, pytrace=False)
    from gpu_arena.native.twin import StaleTwinWarning

    warnings.warn(StaleTwinWarning(text), stacklevel=2)
    if skip:
        pytest.skip(text)
