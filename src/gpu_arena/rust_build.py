"""Build the Rust engine: ``python -m gpu_arena.rust_build`` (``make install`` runs it).

Compiles the crate in ``native/`` of a source checkout with cargo, offline: its crates come from
Debian's packages (``librust-pyo3-dev``, which ``make install`` installs), never from the network.
The extension module goes into :func:`gpu_arena.core.native.native_dir` beside a manifest
(``rust.json``) that ties it to the digest of the crate's sources; :func:`gpu_arena.core.native.rust`
loads it only while that digest matches. Without cargo or the crates it says so and exits
non-zero, and the Python core runs (decision 0026).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from .core.native import RUST_MANIFEST, crate_digest, crate_dir, interpreter_tag, native_dir
from .native_build import place

CRATE_LIB = "libgpu_arena_rs.so"


def build(out: Path, *, quiet: bool = False) -> dict[str, Any]:
    """Compile the crate and place its module in ``out``; returns the manifest written there.

    As with the kernels (:func:`gpu_arena.native_build.build`), each build is a new file named by
    its digest and the manifest is replaced last, so a process that has the previous build mapped
    keeps it."""
    crate = crate_dir()
    if crate is None:
        raise RuntimeError("no crate here (native/ of a source checkout)")
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(cargo).exists():
        raise RuntimeError("cargo is not installed")
    digest = crate_digest(crate)  # of the sources compiled, even if they move on meanwhile
    env = {**os.environ, "PYO3_PYTHON": sys.executable, "CARGO_TARGET_DIR": str(crate / "target")}
    done = subprocess.run([cargo, "build", "--release", "--offline", "--quiet"], cwd=crate, env=env,
                          capture_output=quiet, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"cargo build failed:\n{(done.stderr or '')[-4000:] if quiet else ''}")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    out.mkdir(parents=True, exist_ok=True)
    name = place((crate / "target" / "release" / CRATE_LIB).read_bytes(), out / f"gpu_arena_rs-{digest[:16]}{suffix}")
    manifest: dict[str, Any] = {"abi": interpreter_tag(), "sha256": digest, "file": name}
    place((json.dumps(manifest, indent=1) + "\n").encode(), out / RUST_MANIFEST)
    for stale in out.glob(f"gpu_arena_rs-*{suffix}"):
        if stale.name != name:
            stale.unlink()
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where the build goes (default: $GPU_ARENA_NATIVE_DIR, else gpu-arena-native in the environment)")
    parser.add_argument("--quiet", action="store_true", help="print cargo's output only on failure")
    args = parser.parse_args(argv)
    out = args.out or native_dir()
    try:
        build(out, quiet=args.quiet)
    except (RuntimeError, OSError) as exc:
        print(f"gpu_arena.rust_build: {exc}\nThe Python core runs instead (the same results).", file=sys.stderr)
        return 1
    print(f"built the Rust engine into {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
