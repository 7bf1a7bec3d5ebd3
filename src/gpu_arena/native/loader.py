"""The Rust engine's build (``native/``, decision 0026), loaded only where it is the crate as it is.

``make install`` compiles the crate into ``<venv>/gpu-arena-native`` (see
:mod:`gpu_arena.native.build`), beside a manifest (``rust.json``) holding the digest of the crate's
sources it was built from. The build lives outside the source tree on purpose, and :func:`rust`
loads it only while that digest matches the crate on disk and it was built for this interpreter;
anywhere else the Python core plays, with the same results (decision 0029: the Rust engine is the
one accelerator; the Python core is the specification and the fallback).

``GPU_ARENA_NATIVE=0`` leaves the build unloaded, as on a machine without cargo (to choose the
engine an environment plays on, use ``GPU_ARENA_ENGINE``); ``GPU_ARENA_NATIVE_DIR`` moves the
build. :func:`status` says whether it loaded, for benchmarks to record.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

RUST_MANIFEST = "rust.json"  # the Rust engine's build (gpu_arena.native.build, decision 0026)
RUST_MODULE = "gpu_arena_rs"
# whether the Rust engine loaded: "loaded", or why not
_STATUS: dict[str, str] = {}


def native_dir() -> Path:
    """Where the build lives: ``$GPU_ARENA_NATIVE_DIR``, else ``gpu-arena-native`` in the
    environment's prefix (the virtualenv ``make install`` fills)."""
    return Path(os.environ.get("GPU_ARENA_NATIVE_DIR") or Path(sys.prefix) / "gpu-arena-native")


def interpreter_tag() -> str:
    """The interpreter a build is for (extension modules load only into the one they were built for;
    the extension suffix tells apart debug and free-threaded builds of the same version)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or f".{sys.implementation.cache_tag}-{sys.platform}.so"
    return suffix.strip(".").removesuffix(".so").removesuffix(".pyd")


def _manifest(path: Path) -> dict[str, Any] | str:
    """A build's manifest where the build is on and was made for this interpreter, else why not."""
    if os.environ.get("GPU_ARENA_NATIVE", "1") == "0":
        return "GPU_ARENA_NATIVE=0"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return "not built (make install builds it)"
    if not isinstance(manifest, dict) or manifest.get("abi") != interpreter_tag():
        return "not built for this interpreter (make install builds it)"
    return manifest


def _load_extension(name: str, path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    if spec is None:
        raise ImportError(f"no extension module at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def status() -> dict[str, str]:
    """Whether the Rust engine loaded (once :func:`rust` was asked): ``{"gpu_arena_rs": "loaded"}``
    or the reason it did not."""
    return dict(_STATUS)


def crate_dir() -> Path | None:
    """The Rust engine's crate (``native/`` of a source checkout), if this is one."""
    crate = Path(__file__).resolve().parents[3] / "native"
    return crate if (crate / "Cargo.toml").is_file() else None


def crate_digest(crate: Path) -> str:
    """The SHA-256 of the crate's sources (its manifests, lock file and ``src/**/*.rs``), in
    path order: what a build of it is tied to."""
    h = hashlib.sha256()
    files = [crate / "Cargo.toml", crate / "Cargo.lock", crate / ".cargo" / "config.toml",
             *sorted((crate / "src").rglob("*.rs"))]
    for path in files:
        if path.is_file():
            h.update(path.relative_to(crate).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


_RUST: list[ModuleType | str] = []


def rust() -> ModuleType | str:
    """The Rust engine's module where ``make install`` built it from the crate as it is now, else
    why not (it is then not used: the Python core runs). Loaded once per process;
    ``GPU_ARENA_NATIVE=0`` leaves it unloaded."""
    if not _RUST:
        try:
            _RUST.append(_rust())
        except Exception as exc:  # a corrupt extension, a manifest of the wrong shape
            _RUST.append(f"the build did not load ({type(exc).__name__}: {exc})")
        module = _RUST[0]
        _STATUS[RUST_MODULE] = "loaded" if isinstance(module, ModuleType) else f"not loaded: {module}"
    return _RUST[0]


def _rust() -> ModuleType | str:
    where = native_dir()
    manifest = _manifest(where / RUST_MANIFEST)
    if isinstance(manifest, str):
        return manifest
    crate = crate_dir()
    if crate is not None and manifest.get("sha256") != crate_digest(crate):
        return "its crate changed since the build (make install builds it again)"
    return _load_extension(RUST_MODULE, where / str(manifest["file"]))
