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
    module = _load()
    if isinstance(module, str):
        if os.environ.get("CI"):
            pytest.fail(f"the Rust engine did not load under CI: {module}")
        pytest.skip(f"the Rust engine is not built here: {module}")
    return module
