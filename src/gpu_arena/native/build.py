"""Build the Rust engine in place: ``python -m gpu_arena.native.build`` (``make install`` runs it).

The package's build compiles the crate (``setup.py``, setuptools-rust): ``pip install -e .`` puts
``gpu_arena/native/gpu_arena_rs`` beside the sources, and a wheel carries it. After an edit of the
crate, this module builds it again in place (``setup.py build_rust --inplace --release``), offline:
its crates come from Debian's packages (``librust-pyo3-dev``, which ``make install`` installs), never
from the network. Here the build is required: without cargo or the crates it says so and exits
non-zero, and the Python core runs (decision 0026). setuptools-rust moves the new module into place
whole, so a process that has the previous one mapped (a server, a training run) keeps running.

``python -m gpu_arena.native.build --sync`` (``make native-sync``) is the one writer of
``native/mirrors.json``: after a port it builds the crate, records the digests of the Python modules
the crate mirrors, and runs ``tests/native`` against the new build, putting the old manifest back
if they fail. :func:`twin_problems` says what keeps the twin from playing (a module edited since
the port, a build of other sources), naming each module or file: ``tests/native`` fails on it
under CI.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from .loader import build_record, crate_digest, crate_dir, crate_sources, installed


def stale_sources(record: dict[str, Any] | None, crate: Path) -> list[str] | None:
    """The crate's sources that differ from those a build was compiled from (``record``:
    :func:`~gpu_arena.native.loader.build_record`; edited, added or removed files), by path within
    the crate; ``[]`` where the build is the crate as it is, and ``None`` where there is no build or
    it records no sources to compare."""
    if record is None:
        return None
    if record.get("sha256") == crate_digest(crate):
        return []
    built = record.get("sources")
    if not built:
        return None
    now = crate_sources(crate)
    return sorted(name for name in built.keys() | now.keys() if built.get(name) != now.get(name))


def installed_record() -> dict[str, Any] | None:
    """What the installed build was compiled from, or None where there is none."""
    module = installed()
    return build_record(module) if isinstance(module, ModuleType) else None


def build(*, quiet: bool = False) -> None:
    """Compile the crate into the package in place (``setup.py build_rust --inplace --release``);
    raises ``RuntimeError`` where it cannot (no crate, no cargo, a compile error)."""
    crate = crate_dir()
    if crate is None:
        raise RuntimeError("no crate here (native/ of a source checkout)")
    root = crate.parent
    env = {**os.environ, "GPU_ARENA_RUST_REQUIRED": "1"}  # setup.py: fail rather than skip the extension
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_rust", "--inplace", "--release"], cwd=root,
                          env=env, capture_output=quiet, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the build failed:\n{(done.stderr or '')[-4000:] if quiet else ''}")


_INSTALLED: Any = object()  # twin_problems' default build: the installed one


def twin_problems(crate: Path | None = None, record: dict[str, Any] | None = _INSTALLED,
                  package: Path | None = None) -> list[str]:
    """What keeps the Rust engine from being the Python core's twin, one line per cause naming the
    Python modules edited since the port (``native/mirrors.json``) or the crate's files changed
    since the build (``record``, default: the installed build's; None: no build); ``[]`` where it
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
    if record is _INSTALLED:
        record = installed_record()
    changed = stale_sources(record, crate)
    if changed:
        problems.append(f"the Rust build is older than its sources: {', '.join(changed)}; `make install` rebuilds it")
    elif changed is None and record is not None:
        problems.append("the Rust build is not the crate as it is; `make install` rebuilds it")
    return problems


def write_mirrors(crate: Path, package: Path | None = None) -> list[str]:
    """Record in ``native/mirrors.json`` the digest of every module the crate mirrors as it is now;
    returns the modules whose digest changed (the file's one writer: ``make native-sync``)."""
    from .twin import MIRRORED, MIRRORS_FILE, mirror_digests, recorded_mirrors

    before = recorded_mirrors(crate)
    now = mirror_digests(package)
    changed = [name for name in MIRRORED if isinstance(before, str) or before.get(name) != now[name]]
    _write(crate / MIRRORS_FILE, json.dumps(dict(sorted(now.items())), indent=1) + "\n")
    return changed


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as a new file moved into place whole."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def sync(*, check: bool = True, quiet: bool = False) -> int:
    """``make native-sync``: record the mirrored modules' digests, build the crate (the build carries
    the manifest, for an installed package to check itself against) and (``check``) run
    ``tests/native`` under ``CI=true`` (nothing skips) against that build; where the build or the
    tests fail the manifest as it was is put back. Returns an exit status."""
    crate = crate_dir()
    if crate is None:
        print("gpu_arena.native.build: no crate here (native/ of a source checkout)", file=sys.stderr)
        return 1
    manifest = crate / "mirrors.json"
    before = manifest.read_bytes() if manifest.is_file() else None

    def put_back(why: str) -> int:
        if before is None:
            manifest.unlink(missing_ok=True)
        else:
            _write(manifest, before.decode())
        print(f"gpu_arena.native.build: {why}\nnative/mirrors.json is unchanged.", file=sys.stderr)
        return 1

    changed = write_mirrors(crate)
    try:
        build(quiet=quiet)
    except (RuntimeError, OSError) as exc:
        return put_back(str(exc))
    print(f"native/mirrors.json: {', '.join(changed) if changed else 'no module changed'}")
    tests = crate.parent / "tests" / "native"
    if not check or not tests.is_dir():
        return 0
    print("checking the port: pytest tests/native")
    done = subprocess.run([sys.executable, "-m", "pytest", str(tests), "-q", "-p", "no:cacheprovider", "-x"],
                          cwd=crate.parent, env={**os.environ, "CI": "true"}, check=False)
    if done.returncode != 0:
        return put_back("the Rust engine differs from the Python core (above)")
    print("tests/native passed: commit native/mirrors.json with the port")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="print cargo's output only on failure")
    parser.add_argument("--sync", action="store_true", help="after a port: build, record the mirrored modules' "
                        "digests in native/mirrors.json and check the port with tests/native (make native-sync)")
    parser.add_argument("--no-check", action="store_true", help="with --sync: record the digests without running tests/native")
    args = parser.parse_args(argv)
    if args.sync:
        return sync(check=not args.no_check, quiet=args.quiet)
    try:
        build(quiet=args.quiet)
    except (RuntimeError, OSError) as exc:
        print(f"gpu_arena.native.build: {exc}\nThe Python core runs instead (the same results).", file=sys.stderr)
        return 1
    print("built the Rust engine into gpu_arena/native")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
