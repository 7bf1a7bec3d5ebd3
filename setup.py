"""The package's build: everything is in pyproject.toml except the Rust engine (``native/``).

setuptools-rust compiles the crate into ``gpu_arena/native/gpu_arena_rs`` (in place for an editable
install), offline: its crates come from Debian's packages through ``native/.cargo/config.toml``,
which cargo reads only when told (it looks for its config from the working directory up). The
extension is optional: without cargo or the crates the install still succeeds, and the Python core
plays (``gpu-arena info`` says which engine plays and why).

The build passes the crate's digest, its sources' digests and the port's manifest
(``native/mirrors.json``) into the module (``CRATE_DIGEST``, ``CRATE_SOURCES``, ``CRATE_MIRRORS``):
:mod:`gpu_arena.native.loader` compares them with the crate and the Python core as they are, so a
build older than its sources, or a port older than the Python core, is named instead of playing.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools_rust import Binding, RustExtension

ROOT = Path(__file__).resolve().parent
CRATE = ROOT / "native"


def _loader() -> ModuleType:
    """gpu_arena.native.loader by path: the package itself is not importable while it is built."""
    spec = importlib.util.spec_from_file_location("_gpu_arena_loader", ROOT / "src" / "gpu_arena" / "native" / "loader.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rust_extensions() -> list[RustExtension]:
    if not (CRATE / "Cargo.toml").is_file():  # a source distribution without the crate
        return []
    loader = _loader()
    mirrors = CRATE / "mirrors.json"
    env = {
        **os.environ,  # setuptools-rust runs cargo with exactly this environment
        "GPU_ARENA_CRATE_DIGEST": loader.crate_digest(CRATE),
        "GPU_ARENA_CRATE_SOURCES": json.dumps(loader.crate_sources(CRATE), sort_keys=True),
        "GPU_ARENA_CRATE_MIRRORS": mirrors.read_text() if mirrors.is_file() else "{}",
    }
    return [RustExtension("gpu_arena.native.gpu_arena_rs", path=str(CRATE / "Cargo.toml"), binding=Binding.PyO3,
                          # the install succeeds without it; `python -m gpu_arena.native.build` requires it
                          optional=os.environ.get("GPU_ARENA_RUST_REQUIRED") != "1", debug=False, env=env,
                          cargo_manifest_args=["--config", str(CRATE / ".cargo" / "config.toml")])]


setup(rust_extensions=_rust_extensions())
