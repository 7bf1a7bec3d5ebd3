"""The Rust engine's module for the tests that compare it with the Python core.

``GPU_ARENA_RS_SO`` may name a build to test (a crate built elsewhere); otherwise the one
``make install`` built is loaded through :func:`gpu_arena.native.loader.rust`. Where there is none the
tests skip, except under CI (``CI=true``, which ``.ci/run`` sets), where the build is part of the
install and its absence fails. A twin out of step with the Python core — a mirrored module edited
since the port, a build older than the crate — skips them outside CI, with a warning naming the
modules, and fails them under CI (``twin_level.require_level``; ``test_rs_level.py`` is the gate).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

import pytest
from twin_level import require_level, under_ci


def _load() -> ModuleType | str:
    path = os.environ.get("GPU_ARENA_RS_SO")
    if path:
        spec = importlib.util.spec_from_file_location("gpu_arena_rs", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["gpu_arena_rs"] = module
        spec.loader.exec_module(module)
        return module
    from gpu_arena.native import loader

    return loader.rust()


@pytest.fixture(scope="session")
def rs() -> ModuleType:
    """The Rust engine, to compare with the Python core. Where a module it mirrors has changed
    since the port (``native/mirrors.json``) the comparisons skip, naming it, outside CI: the
    environment then plays on the Python core, and changing the economy never needs Rust (decision
    0026). Under CI they fail."""
    module = _load()
    if isinstance(module, str):
        from gpu_arena.native.twin import _native_engine

        module = str(_native_engine())  # names the crate's files a stale build was not made from
        if under_ci():
            pytest.fail(f"the Rust engine did not load under CI: {module}", pytrace=False)
        pytest.skip(f"the Rust engine is not built here: {module}")
    from gpu_arena.native.twin import STALE_PORT, _native_engine

    level = _native_engine()
    if isinstance(level, str) and level.startswith(STALE_PORT):
        require_level([level])
    return module
