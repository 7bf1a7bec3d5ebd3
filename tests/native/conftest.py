"""The Rust engine's module for the tests that compare it with the Python core.

``GPU_ARENA_RS_SO`` may name a build to test (a crate built elsewhere); otherwise the one
``make install`` built is loaded through :func:`gpu_arena.core.native.rust`. Where there is none the
tests skip, except under CI, where the build is part of the install and its absence fails.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

import pytest


def _load() -> ModuleType | str:
    path = os.environ.get("GPU_ARENA_RS_SO")
    if path:
        spec = importlib.util.spec_from_file_location("gpu_arena_rs", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["gpu_arena_rs"] = module
        spec.loader.exec_module(module)
        return module
    from gpu_arena.core import native

    return native.rust()


@pytest.fixture(scope="session")
def rs() -> ModuleType:
    """The Rust engine, to compare with the Python core. Where a module it mirrors has changed
    since the port (``native/mirrors.json``) the comparisons skip, naming it: the environment then
    plays on the Python core, and changing the economy never needs Rust (decision 0026)."""
    module = _load()
    if isinstance(module, str):
        if os.environ.get("CI"):
            pytest.fail(f"the Rust engine did not load under CI: {module}")
        pytest.skip(f"the Rust engine is not built here: {module}")
    from gpu_arena.native_episode import _native_engine

    level = _native_engine()
    if isinstance(level, str) and "changed since the port" in level:
        pytest.skip(level)
    return module
