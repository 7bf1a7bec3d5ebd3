"""Build the Rust engine: ``python -m gpu_arena.native.build`` (``make install`` runs it).

Compiles the crate in ``native/`` of a source checkout with cargo, offline: its crates come from
Debian's packages (``librust-pyo3-dev``, which ``make install`` installs), never from the network.
The extension module goes into :func:`gpu_arena.native.loader.native_dir` beside a manifest
(``rust.json``) that ties it to the digest of the crate's sources (and records each file's, so a
stale build names what changed: :func:`stale_sources`); :func:`gpu_arena.native.loader.rust` loads it
only while that digest matches. Without cargo or the crates it says so and exits non-zero, and the
Python core runs (decision 0026).

``python -m gpu_arena.native.build --sync`` (``make native-sync``) is the one writer of
``native/mirrors.json``: after a port it builds the crate, records the digests of the Python modules
the crate mirrors, and runs ``tests/native`` against the new build, putting the old manifest back
if they fail. :func:`twin_problems` says what keeps the twin from playing (a module edited since
the port, a build of other sources), naming each module or file: ``tests/native`` fails on it
under CI.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from .loader import RUST_MANIFEST, crate_digest, crate_dir, interpreter_tag, native_dir

CRATE_LIB = "libgpu_arena_rs.so"
_MYPYC_MANIFEST = "manifest.json"  # the removed kernels build's (decision 0029): cleared by build()


def crate_sources(crate: Path) -> dict[str, str]:
    """The SHA-256 of each source of the crate :func:`~gpu_arena.native.loader.crate_digest` covers
    (its manifests, lock file, cargo config and every ``src/**/*.rs``), by path within the crate."""
    files = [crate / "Cargo.toml", crate / "Cargo.lock", crate / ".cargo" / "config.toml",
             *sorted((crate / "src").rglob("*.rs"))]
    return {path.relative_to(crate).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in files if path.is_file()}


def stale_sources(out: Path, crate: Path) -> list[str] | None:
    """The crate's sources that differ from those the build in ``out`` was compiled from (edited,
    added or removed), by path within the crate; ``[]`` where the build is the crate as it is, and
    ``None`` where ``out`` holds no build. (A build that recorded no sources names those newer than
    itself, or ``None`` where it differs all the same.)"""
    try:
        manifest = json.loads((out / RUST_MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict):
        return None
    if manifest.get("sha256") == crate_digest(crate):
        return []
    now = crate_sources(crate)
    built = manifest.get("sources")
    if isinstance(built, dict):
        return sorted(name for name in built.keys() | now.keys() if built.get(name) != now.get(name))
    # a build from before the manifest named its sources: those newer than it
    try:
        made = (out / str(manifest.get("file"))).stat().st_mtime
    except OSError:
        return None
    return sorted(name for name in now if (crate / name).stat().st_mtime > made) or None


def build(out: Path, *, quiet: bool = False) -> dict[str, Any]:
    """Compile the crate and place its module in ``out``; returns the manifest written there.

    A running process may have the previous build mapped (a server, a training run): a shared
    library overwritten in place under it crashes it. So each build is a new file named by its
    digest, moved into place whole (:func:`place`), the manifest is replaced last, and older builds
    are unlinked, which leaves them to the processes that have them open. Files left by the mypyc
    build of the core's kernels (decision 0024, removed by decision 0029) are unlinked too."""
    crate = crate_dir()
    if crate is None:
        raise RuntimeError("no crate here (native/ of a source checkout)")
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(cargo).exists():
        raise RuntimeError("cargo is not installed")
    digest = crate_digest(crate)  # of the sources compiled, even if they move on meanwhile
    sources = crate_sources(crate)
    env = {**os.environ, "PYO3_PYTHON": sys.executable, "CARGO_TARGET_DIR": str(crate / "target")}
    done = subprocess.run([cargo, "build", "--release", "--offline", "--quiet"], cwd=crate, env=env,
                          capture_output=quiet, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"cargo build failed:\n{(done.stderr or '')[-4000:] if quiet else ''}")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    out.mkdir(parents=True, exist_ok=True)
    name = place((crate / "target" / "release" / CRATE_LIB).read_bytes(), out / f"gpu_arena_rs-{digest[:16]}{suffix}")
    manifest: dict[str, Any] = {"abi": interpreter_tag(), "sha256": digest, "file": name, "sources": sources}
    place((json.dumps(manifest, indent=1) + "\n").encode(), out / RUST_MANIFEST)
    for stale in out.glob(f"gpu_arena_rs-*{suffix}"):
        if stale.name != name:
            stale.unlink()
    for stale in [*out.glob(f"gpu_arena.core.kernels*{suffix}"), out / _MYPYC_MANIFEST]:
        stale.unlink(missing_ok=True)
    return manifest


def place(data: bytes, path: Path) -> str:
    """Write ``data`` to ``path`` as a new file moved into place whole; returns its name."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)
    return path.name


def twin_problems(crate: Path | None = None, out: Path | None = None, package: Path | None = None) -> list[str]:
    """What keeps the Rust engine from being the Python core's twin, one line per cause naming the
    Python modules edited since the port (``native/mirrors.json``) or the crate's files changed
    since the build in ``out`` (default: :func:`~gpu_arena.native.loader.native_dir`); ``[]`` where it
    is level, or where there is no crate to compare (an installed package). A missing build is not
    a problem here (without cargo the Python core plays); a stale one is."""
    from .twin import MIRRORS_FILE, recorded_mirrors, stale_mirrors

    crate = crate or crate_dir()
    if crate is None:
        return []
    problems = []
    recorded = recorded_mirrors(crate)
    if isinstance(recorded, str):
        problems.append(recorded)
    else:
        stale = stale_mirrors(recorded, package)
        if stale:
            problems.append(f"the Python core changed since the port (native/{MIRRORS_FILE}): {', '.join(stale)}; "
                            "port the change to native/src, then `make native-sync`")
    changed = stale_sources(out or native_dir(), crate)
    if changed:
        problems.append(f"the Rust build is older than its sources: {', '.join(changed)}; `make install` rebuilds it")
    elif changed is None and (out or native_dir()).joinpath(RUST_MANIFEST).is_file():
        problems.append("the Rust build is not the crate as it is; `make install` rebuilds it")
    return problems


def write_mirrors(crate: Path, package: Path | None = None) -> list[str]:
    """Record in ``native/mirrors.json`` the digest of every module the crate mirrors as it is now;
    returns the modules whose digest changed (the file's one writer: ``make native-sync``)."""
    from .twin import MIRRORED, MIRRORS_FILE, mirror_digests, recorded_mirrors

    before = recorded_mirrors(crate)
    now = mirror_digests(package)
    changed = [name for name in MIRRORED if isinstance(before, str) or before.get(name) != now[name]]
    place((json.dumps(dict(sorted(now.items())), indent=1) + "\n").encode(), crate / MIRRORS_FILE)
    return changed


def sync(out: Path, *, check: bool = True, quiet: bool = False) -> int:
    """``make native-sync``: build the crate, record the mirrored modules' digests and (``check``)
    run ``tests/native`` under ``CI=true`` (nothing skips) against that build; where they fail the
    manifest as it was is put back. Returns an exit status."""
    crate = crate_dir()
    if crate is None:
        print("gpu_arena.native.build: no crate here (native/ of a source checkout)", file=sys.stderr)
        return 1
    try:
        build(out, quiet=quiet)
    except (RuntimeError, OSError) as exc:
        print(f"gpu_arena.native.build: {exc}\nnative/mirrors.json is unchanged.", file=sys.stderr)
        return 1
    manifest = crate / "mirrors.json"
    before = manifest.read_bytes() if manifest.is_file() else None
    changed = write_mirrors(crate)
    print(f"native/mirrors.json: {', '.join(changed) if changed else 'no module changed'}")
    tests = crate.parent / "tests" / "native"
    if not check or not tests.is_dir():
        return 0
    print("checking the port: pytest tests/native")
    done = subprocess.run([sys.executable, "-m", "pytest", str(tests), "-q", "-p", "no:cacheprovider", "-x"],
                          cwd=crate.parent, env={**os.environ, "CI": "true", "GPU_ARENA_NATIVE_DIR": str(out)},
                          check=False)
    if done.returncode != 0:
        if before is None:
            manifest.unlink()
        else:
            place(before, manifest)
        print("gpu_arena.native.build: the Rust engine differs from the Python core (above); "
              "native/mirrors.json is unchanged.", file=sys.stderr)
        return 1
    print("tests/native passed: commit native/mirrors.json with the port")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where the build goes (default: $GPU_ARENA_NATIVE_DIR, else gpu-arena-native in the environment)")
    parser.add_argument("--quiet", action="store_true", help="print cargo's output only on failure")
    parser.add_argument("--sync", action="store_true", help="after a port: build, record the mirrored modules' "
                        "digests in native/mirrors.json and check the port with tests/native (make native-sync)")
    parser.add_argument("--no-check", action="store_true", help="with --sync: record the digests without running tests/native")
    args = parser.parse_args(argv)
    out = args.out or native_dir()
    if args.sync:
        return sync(out, check=not args.no_check, quiet=args.quiet)
    try:
        build(out, quiet=args.quiet)
    except (RuntimeError, OSError) as exc:
        print(f"gpu_arena.native.build: {exc}\nThe Python core runs instead (the same results).", file=sys.stderr)
        return 1
    print(f"built the Rust engine into {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
