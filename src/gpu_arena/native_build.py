"""Build the core's compiled kernels: ``python -m gpu_arena.native_build`` (``make install`` runs it).

Compiles each module of :data:`gpu_arena.core.native.COMPILED` with mypyc (it ships with mypy, a
dev dependency) in a scratch directory, copies the extension modules into
:func:`gpu_arena.core.native.native_dir` and writes the manifest that ties them to the digest of
the sources they were built from. Needs a C compiler and the Python headers; without them it says
so and exits non-zero, and the core runs its Python source, which gives the same results.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from .core.native import COMPILED, MANIFEST, interpreter_tag, native_dir, source_digest

_BUILD_NAME = re.compile(r"-[0-9a-f]{16}$")
_SETUP = """\
from setuptools import setup
from mypyc.build import mypycify

setup(name="gpu_arena_native", script_args=["build_ext", "--inplace"],
      ext_modules=mypycify({paths!r}, opt_level="3", debug_level="0"))
"""


def _source(name: str) -> Path:
    return Path(__file__).resolve().parent.joinpath(*name.split(".")[1:]).with_suffix(".py")


def build(out: Path, *, quiet: bool = False) -> dict[str, Any]:
    """Compile :data:`COMPILED` into ``out``; returns the manifest written there.

    A running process may have the previous build mapped (a server, a training run): a shared
    library overwritten in place under it crashes it. So each build's files are new files, named
    by the digest of the source they were built from, moved into place whole (``os.replace``), and
    the manifest is replaced last, in one step; files of older builds are unlinked, which leaves
    them to the processes that have them open.
    """
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    with tempfile.TemporaryDirectory(prefix="gpu-arena-native-") as tmp:
        root = Path(tmp)
        paths, digests = [], {}
        for name in COMPILED:
            parts = name.split(".")
            for depth in range(1, len(parts)):  # the packages, empty: each kernel imports nothing of the project
                init = root.joinpath(*parts[:depth], "__init__.py")
                init.parent.mkdir(parents=True, exist_ok=True)
                init.touch()
            target = root.joinpath(*parts).with_suffix(".py")
            shutil.copyfile(_source(name), target)
            digests[name] = source_digest(target)  # of the bytes compiled, even if the source moves on meanwhile
            paths.append(str(target.relative_to(root)))
        (root / "setup.py").write_text(_SETUP.format(paths=paths))
        done = subprocess.run([sys.executable, "setup.py"], cwd=root, capture_output=quiet, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"mypyc build failed:\n{done.stdout[-4000:] if quiet else ''}{done.stderr[-4000:] if quiet else ''}")
        out.mkdir(parents=True, exist_ok=True)
        modules: dict[str, dict[str, Any]] = {}
        built = {p.relative_to(root): p for p in root.rglob(f"*{suffix}") if "build" not in p.relative_to(root).parts}
        for name in COMPILED:
            parts = name.split(".")
            shim = Path(*parts[:-1], parts[-1] + suffix)
            libraries = {".".join([*parts[:-1], rel.name[: -len(suffix)]]): rel for rel in built
                         if rel.parent == shim.parent and rel.name.startswith(parts[-1] + "__mypyc")}
            if shim not in built:
                raise RuntimeError(f"mypyc built no {shim} (found: {', '.join(map(str, built)) or 'nothing'})")
            placed = {module: place(built[rel].read_bytes(), out / f"{module}-{digests[name][:16]}{suffix}")
                      for module, rel in [(name, shim), *libraries.items()]}
            modules[name] = {"sha256": digests[name], "file": placed.pop(name), "libraries": placed}
    manifest: dict[str, Any] = {"abi": interpreter_tag(), "modules": modules}
    place((json.dumps(manifest, indent=1) + "\n").encode(), out / MANIFEST)
    kept = {f for m in modules.values() for f in [m["file"], *m["libraries"].values()]}
    for stale in out.iterdir():
        # only this builder's own files: older builds (gpu_arena.<module>-<digest>.<suffix>) and
        # partial copies left by an interrupted build; anything else in the folder stays
        stem = stale.name[: -len(suffix)] if stale.name.endswith(suffix) else ""
        ours = stale.name.startswith("gpu_arena.") and _BUILD_NAME.search(stem) is not None
        if stale.name not in kept and (ours or stale.name.endswith(".partial")):
            stale.unlink()
    return manifest


def place(data: bytes, path: Path) -> str:
    """Write ``data`` to ``path`` as a new file moved into place whole; returns its name."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)
    return path.name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where the builds go (default: $GPU_ARENA_NATIVE_DIR, else gpu-arena-native in the environment)")
    parser.add_argument("--quiet", action="store_true", help="print the compiler's output only on failure")
    args = parser.parse_args(argv)
    out = args.out or native_dir()
    try:
        manifest = build(out, quiet=args.quiet)
    except (RuntimeError, OSError) as exc:
        print(f"gpu_arena.native_build: {exc}\nThe core runs its Python source instead (same results, slower).",
              file=sys.stderr)
        return 1
    print(f"compiled {', '.join(manifest['modules'])} into {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
