"""The Rust engine (``native/``, decision 0026), loaded only where it is the crate as it is.

The package's build compiles the crate into ``gpu_arena.native.gpu_arena_rs`` (``setup.py``, with
setuptools-rust; in place for the editable install ``make install`` makes), and passes into it the
digest of the crate's sources it was built from (``CRATE_DIGEST``, with each file's in
``CRATE_SOURCES``) and the port's manifest then (``CRATE_MIRRORS``, ``native/mirrors.json``).
:func:`rust` loads it only while, in a source checkout, that digest is the crate's on disk;
anywhere else the Python core plays, with the same results (decision 0029: the Rust engine is the
one accelerator; the Python core is the specification and the fallback). The build is optional:
where cargo or Debian's crates are missing the install succeeds without it.

``GPU_ARENA_NATIVE=0`` leaves the build unloaded, as on a machine without cargo (to choose the
engine an environment plays on, use ``GPU_ARENA_ENGINE``). :func:`status` says whether it loaded,
for benchmarks to record. Nothing here imports beyond the standard library: ``setup.py`` loads this
file by path to compute the digests it passes in.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

RUST_MODULE = "gpu_arena.native.gpu_arena_rs"  # built by the package's build (setup.py)
STATUS_KEY = "gpu_arena_rs"  # status()'s key, as benchmarks have recorded it
# whether the Rust engine loaded: "loaded", or why not
_STATUS: dict[str, str] = {}


def status() -> dict[str, str]:
    """Whether the Rust engine loaded (once :func:`rust` was asked): ``{"gpu_arena_rs": "loaded"}``
    or the reason it did not."""
    return dict(_STATUS)


def crate_dir() -> Path | None:
    """The Rust engine's crate (``native/`` of a source checkout), if this is one."""
    crate = Path(__file__).resolve().parents[3] / "native"
    return crate if (crate / "Cargo.toml").is_file() else None


def _crate_files(crate: Path) -> list[Path]:
    return [path for path in [crate / "Cargo.toml", crate / "Cargo.lock", crate / ".cargo" / "config.toml",
                              *sorted((crate / "src").rglob("*.rs"))] if path.is_file()]


def crate_digest(crate: Path) -> str:
    """The SHA-256 of the crate's sources (its manifests, lock file, cargo config and
    ``src/**/*.rs``), in path order: what a build of it is tied to."""
    h = hashlib.sha256()
    for path in _crate_files(crate):
        h.update(path.relative_to(crate).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def crate_sources(crate: Path) -> dict[str, str]:
    """The SHA-256 of each source :func:`crate_digest` covers, by path within the crate (a stale
    build names the files that changed since it)."""
    return {path.relative_to(crate).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in _crate_files(crate)}


def build_record(module: ModuleType) -> dict[str, Any]:
    """What a build of the crate says it was made from: ``sha256`` (the crate's digest),
    ``sources`` (each file's) and ``mirrors`` (``native/mirrors.json`` as it was); empty values for a
    build that carries none (compiled without the package's build)."""
    def parsed(name: str) -> dict[str, str]:
        try:
            value = json.loads(getattr(module, name, "{}"))
        except (TypeError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    return {"sha256": str(getattr(module, "CRATE_DIGEST", "")), "sources": parsed("CRATE_SOURCES"),
            "mirrors": parsed("CRATE_MIRRORS")}


def installed() -> ModuleType | str:
    """The package's build of the crate as it is installed, whatever it was built from, or why
    there is none."""
    if os.environ.get("GPU_ARENA_NATIVE", "1") == "0":
        return "GPU_ARENA_NATIVE=0"
    try:
        return importlib.import_module(RUST_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != RUST_MODULE:
            raise
        return "not built (the package's build compiles it where cargo and the crates are: make install)"


_RUST: list[ModuleType | str] = []


def rust() -> ModuleType | str:
    """The Rust engine's module where the package's build made it from the crate as it is now, else
    why not (it is then not used: the Python core runs). Loaded once per process;
    ``GPU_ARENA_NATIVE=0`` leaves it unloaded."""
    if not _RUST:
        try:
            _RUST.append(_rust())
        except Exception as exc:  # a corrupt extension, one built for another interpreter
            _RUST.append(f"the build did not load ({type(exc).__name__}: {exc})")
        module = _RUST[0]
        _STATUS[STATUS_KEY] = "loaded" if isinstance(module, ModuleType) else f"not loaded: {module}"
    return _RUST[0]


def _rust() -> ModuleType | str:
    module = installed()
    if isinstance(module, str):
        return module
    crate = crate_dir()
    if crate is not None and build_record(module)["sha256"] != crate_digest(crate):
        return "its crate changed since the build (make install builds it again)"
    return module
