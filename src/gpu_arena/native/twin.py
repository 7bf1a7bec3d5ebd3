"""Whether the Rust engine may play here: its build is the crate as it is
(:func:`gpu_arena.native.loader.rust`) and the crate is a port of the Python core as it is (every
module it mirrors, :data:`MIRRORED`, has the digest recorded in ``native/mirrors.json``, which
``make native-sync`` writes after a port; an installed package compares its modules with the
manifest its build carries). Where a build exists but either has moved on,
:func:`native_engine` warns (:class:`StaleTwinWarning`), naming the modules or files, and the
Python core plays; ``tests/native`` fails on it under CI.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from . import loader

# the Python modules the crate mirrors (paths under src/gpu_arena): an edit to any of them turns the
# Rust engine off until the port is brought level and native/mirrors.json records the new digests
MIRRORED: tuple[str, ...] = (
    "core/types.py", "core/kernels.py", "core/allocation.py", "core/valuation.py", "core/engine.py", "core/records.py",
    "core/observe.py", "core/views.py", "core/shocks.py", "core/judge.py", "core/serialize.py",
    "core/rules/auctions.py", "core/rules/checks.py", "core/rules/clock.py", "core/rules/coalitions.py",
    "core/rules/dispatch.py", "core/rules/holdings.py", "core/rules/limits.py", "core/rules/offers.py",
    "core/rules/outcome.py", "core/policy.py", "policies/negotiator.py", "policies/archetypes.py",
    "policies/planning.py", "core/sums.py",
)
MIRRORS_FILE = "mirrors.json"  # written by `make native-sync` (gpu_arena.native.build.write_mirrors), never by hand
_PACKAGE = Path(__file__).resolve().parents[1]  # gpu_arena


class StaleTwinWarning(UserWarning):
    """The Rust engine was built but does not play: a module it mirrors changed since the port, or
    the crate changed since the build. The warning names them; the Python core plays meanwhile."""


def mirror_digests(package: Path | None = None) -> dict[str, str]:
    """The SHA-256 of each module of :data:`MIRRORED` as it is on disk (in ``package``, default
    this installation's ``gpu_arena``)."""
    root = package or _PACKAGE
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in MIRRORED}


def recorded_mirrors(crate: Path) -> dict[str, str] | str:
    """The digests ``native/mirrors.json`` records for the port, or why there are none."""
    try:
        recorded = json.loads((crate / MIRRORS_FILE).read_text())
    except (OSError, ValueError):
        return f"the crate records no {MIRRORS_FILE} (`make native-sync` writes it)"
    if not isinstance(recorded, dict):
        return f"native/{MIRRORS_FILE} is not a mapping of module to digest (`make native-sync` writes it)"
    return recorded


def stale_mirrors(recorded: Mapping[str, Any], package: Path | None = None) -> list[str]:
    """The modules of :data:`MIRRORED` whose digest is not the one ``recorded`` for the port."""
    digests = mirror_digests() if package is None else mirror_digests(package)
    return [name for name, digest in digests.items() if recorded.get(name) != digest]


_ENGINE: list[ModuleType | str] = []
STALE_PORT = "the Python core changed since the port"  # how native_engine's reason begins for a stale port


def native_engine() -> ModuleType | str:
    """``gpu_arena_rs`` where it may play episodes here, else why not (checked once per process).
    Where a build exists but is stale (:class:`StaleTwinWarning`) it warns, naming what changed."""
    if not _ENGINE:
        _ENGINE.append(_native_engine())
        reason = _ENGINE[0]
        if isinstance(reason, str) and (reason.startswith(STALE_PORT) or "crate changed" in reason):
            warnings.warn(StaleTwinWarning(f"the Rust engine does not play, the Python core does (slower): {reason}"),
                          stacklevel=2)
    return _ENGINE[0]


def _native_engine() -> ModuleType | str:
    module = loader.rust()
    crate = loader.crate_dir()
    if isinstance(module, str):
        if "crate changed" in module and crate is not None:
            from .build import installed_record, stale_sources

            changed = stale_sources(installed_record(), crate)
            if changed:
                return f"its crate changed since the build: {', '.join(changed)} (make install builds it again)"
        return module
    if crate is None:  # an installed package: the port as it was when the package was built
        recorded: dict[str, str] | str = loader.build_record(module)["mirrors"] or \
            f"the build records no {MIRRORS_FILE} (a build made outside the package's build)"
    else:
        recorded = recorded_mirrors(crate)
    if isinstance(recorded, str):
        return recorded
    stale = stale_mirrors(recorded)
    if stale:
        return f"{STALE_PORT}: {', '.join(stale)} (port the change, then make native-sync)"
    return module


__all__ = ["MIRRORED", "MIRRORS_FILE", "STALE_PORT", "StaleTwinWarning", "mirror_digests", "native_engine",
           "recorded_mirrors", "stale_mirrors"]
