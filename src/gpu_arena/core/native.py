"""Compiled builds of the core's kernels, used only where they match their source exactly.

``make install`` compiles :data:`COMPILED` with mypyc into ``<venv>/gpu-arena-native`` (see
:mod:`gpu_arena.native_build`), beside a manifest holding each module's source digest. The
builds live outside the source tree on purpose: a compiled module next to its ``.py`` would shadow
it, so an edit would run stale code until the next build. Here :func:`load` compares the source
on disk with the digest the build was made from and falls back to the source on any mismatch, so
an edited kernel runs as written (slower) until ``make install`` builds it again.

``GPU_ARENA_NATIVE=0`` turns the builds off (the source runs everywhere); ``GPU_ARENA_NATIVE_DIR``
moves them. :func:`status` says which kernels run compiled, for benchmarks to record.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any

# the modules the build compiles: small, typed, and free of the project's classes (see kernels.py)
COMPILED: tuple[str, ...] = ("gpu_arena.core.kernels",)
MANIFEST = "manifest.json"
RUST_MANIFEST = "rust.json"  # the Rust engine's build (gpu_arena.rust_build, decision 0026)
# why each module runs as it does, by name: "compiled", or the reason it runs from source
_STATUS: dict[str, str] = {}


def native_dir() -> Path:
    """Where the builds live: ``$GPU_ARENA_NATIVE_DIR``, else ``gpu-arena-native`` in the
    environment's prefix (the virtualenv ``make install`` fills)."""
    return Path(os.environ.get("GPU_ARENA_NATIVE_DIR") or Path(sys.prefix) / "gpu-arena-native")


def source_digest(path: Path) -> str:
    """The SHA-256 of a module's source bytes, as the manifest records it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def interpreter_tag() -> str:
    """The interpreter a build is for (extension modules load only into the one they were built for;
    the extension suffix tells apart debug and free-threaded builds of the same version)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or f".{sys.implementation.cache_tag}-{sys.platform}.so"
    return suffix.strip(".").removesuffix(".so").removesuffix(".pyd")


def _compiled(name: str, source: Path) -> ModuleType | str:
    """The compiled module ``name``, loaded under its own name, or why not (a build that fails to
    load raises: :func:`load` reports it and runs the source)."""
    where = native_dir()
    manifest = _manifest(where / MANIFEST)
    if isinstance(manifest, str):
        return manifest
    entry = manifest.get("modules", {}).get(name)
    if not isinstance(entry, dict):
        return "not built (make install builds it)"
    if entry.get("sha256") != source_digest(source):
        return "its source changed since the build (make install builds it again)"
    # a mypyc build of a module inside a package is a shim plus a library it imports by name:
    # load the library first under that name, so the shim finds it without a path to search
    for lib_name, filename in entry.get("libraries", {}).items():
        if lib_name not in sys.modules:
            _load_extension(lib_name, where / filename)
    return _load_extension(name, where / entry["file"])


def _manifest(path: Path) -> dict[str, Any] | str:
    """A build's manifest where builds are on and it was made for this interpreter, else why not."""
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


def load(name: str) -> ModuleType:
    """Module ``name`` (one of :data:`COMPILED`): its compiled build where one matches the source
    on disk, else the source itself. Either way it is ``sys.modules[name]``, imported once."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ImportError(f"no module named {name!r}")
    try:
        module = _compiled(name, Path(spec.origin))
    except Exception as exc:  # a corrupt extension, a manifest of the wrong shape, an unreadable source
        module = f"the build did not load ({type(exc).__name__}: {exc})"
    if isinstance(module, ModuleType):
        _STATUS[name] = "compiled"
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, module)  # as the import system does for a submodule
        return module
    _STATUS[name] = f"source: {module}"
    return importlib.import_module(name)


def load_compiled() -> None:
    """:func:`load` every module of :data:`COMPILED` (the core's ``__init__`` does, first)."""
    for name in COMPILED:
        load(name)


def status() -> dict[str, str]:
    """Each compiled-capable module loaded so far: "compiled", or "source: <why>"."""
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
    ``GPU_ARENA_NATIVE=0`` turns it off with the kernels."""
    if not _RUST:
        try:
            _RUST.append(_rust())
        except Exception as exc:  # a corrupt extension, a manifest of the wrong shape
            _RUST.append(f"the build did not load ({type(exc).__name__}: {exc})")
        module = _RUST[0]
        _STATUS["gpu_arena_rs"] = "compiled" if isinstance(module, ModuleType) else f"source: {module}"
    return _RUST[0]


def _rust() -> ModuleType | str:
    where = native_dir()
    manifest = _manifest(where / RUST_MANIFEST)
    if isinstance(manifest, str):
        return manifest
    crate = crate_dir()
    if crate is not None and manifest.get("sha256") != crate_digest(crate):
        return "its crate changed since the build (make install builds it again)"
    return _load_extension("gpu_arena_rs", where / str(manifest["file"]))
