"""The compiled kernels: the same floats as their source, and used only while they match it.

``make install`` compiles :mod:`gpu_arena.core.kernels` with mypyc (decision 0024). The source is
the reference: every kernel must return exactly what the source returns, bit for bit, and the
loader must run the source wherever the build is missing, stale, for another interpreter,
unreadable or turned off.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_arena.core import allocation, kernels, native

SOURCE = Path(native.__file__).with_name("kernels.py")


def _source_kernels() -> ModuleType:
    """kernels.py run as source, under another name (the compiled build owns the real one)."""
    spec = importlib.util.spec_from_file_location("kernels_as_source", SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plain = _source_kernels()
compiled = pytest.mark.skipif(
    native.status().get("gpu_arena.core.kernels") != "compiled",
    reason=f"no compiled kernels match the source ({native.status().get('gpu_arena.core.kernels')}); "
           "make install builds them")

hours_st = st.integers(1, 12)
block_st = st.tuples(hours_st, st.integers(1, 8), st.sampled_from([0.8, 0.9, 0.95, 1.0]),
                     st.floats(0.0, 40.0, allow_nan=False))
job_st = st.tuples(st.integers(0, 16), st.integers(0, 6), st.integers(1, 8), st.sampled_from([0.8, 0.9, 1.0]),
                   st.floats(0.0, 300.0, allow_nan=False), st.sampled_from([0.0, 0.25, 0.5]))


def test_the_core_imports_the_module_the_loader_chose() -> None:
    assert allocation.kernels is sys.modules["gpu_arena.core.kernels"] is kernels
    state = native.status()["gpu_arena.core.kernels"]
    assert state == "compiled" or state.startswith("source: ")
    assert (state == "compiled") == (Path(kernels.__file__).suffix != ".py")


def test_a_fresh_build_is_the_one_that_runs() -> None:
    """Where make install's build matches the source, the core must be running it (a loader
    that silently fell back would cost the speed without a word)."""
    try:
        entry = json.loads((native.native_dir() / native.MANIFEST).read_text())["modules"]["gpu_arena.core.kernels"]
    except (OSError, ValueError, KeyError, TypeError):
        pytest.skip("no readable build in this environment (make install builds one)")
    if os.environ.get("GPU_ARENA_NATIVE") == "0" or entry["sha256"] != native.source_digest(SOURCE):
        pytest.skip("the build is turned off or older than the source")
    assert native.status()["gpu_arena.core.kernels"] == "compiled"
    import gpu_arena.core
    assert gpu_arena.core.kernels is kernels  # the package's attribute is the module the loader chose


@compiled
@settings(max_examples=150, deadline=None)
@given(st.lists(block_st, max_size=7), st.lists(job_st, max_size=4), st.lists(block_st, min_size=1, max_size=3),
       st.floats(0.0, 200.0, allow_nan=False) | st.just(float("inf")))
def test_compiled_kernels_equal_the_source_bit_for_bit(blocks: list, jobs: list, extras: list, budget: float) -> None:
    b, j = tuple(blocks), tuple(jobs)
    radix = kernels.radix(j)
    assert radix == plain.radix(j)
    assert repr(kernels.solve_frontier(b, j)) == repr(plain.solve_frontier(b, j))
    frontier, parents = kernels.dp(b, j, radix)
    frontier_src, parents_src = plain.dp(b, j, radix)
    assert list(frontier.items()) == list(frontier_src.items())  # the same states in the same order
    assert [list(p.items()) for p in parents] == [list(p.items()) for p in parents_src]
    codes, neg_e = tuple(frontier), tuple(frontier.values())
    assert repr(kernels.state_values(codes, j, radix)) == repr(plain.state_values(codes, j, radix))
    for job in j:
        for hours in range(job[0] + 2):
            assert repr(kernels.job_value(job[4], job[0], job[5], hours)) == repr(
                plain.job_value(job[4], job[0], job[5], hours))
    fr = allocation.Frontier(b, j)
    groups = kernels.frontier_groups(j, fr.columns, fr.base, fr.neg_e)
    assert repr(groups) == repr(plain.frontier_groups(j, fr.columns, fr.base, fr.neg_e))
    for extra in extras:
        assert repr(kernels.scan_extra(j, fr.states, fr.neg_e, fr.vals, fr.base, extra, budget)) == repr(
            plain.scan_extra(j, fr.states, fr.neg_e, fr.vals, fr.base, extra, budget))
        assert repr(kernels.grouped_extra(j, groups[0], groups[1], extra, 1e-9)) == repr(
            plain.grouped_extra(j, groups[0], groups[1], extra, 1e-9))
    assert neg_e == fr.neg_e
    assert repr(kernels.best_plan(fr.codes, fr.neg_e, fr.base, fr.parents, len(j), budget)) == repr(
        plain.best_plan(fr.codes, fr.neg_e, fr.base, fr.parents, len(j), budget))


# ---------------------------------------------------------------- the loader, in fresh interpreters

PROBE = ("import json; from gpu_arena.core import allocation, native; "
         "print(json.dumps([native.status()['gpu_arena.core.kernels'], allocation.kernels.__file__]))")


def _probe(native_dir: Path, **env: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120,
                          env={**os.environ, "GPU_ARENA_NATIVE": "1", **env, "GPU_ARENA_NATIVE_DIR": str(native_dir)})
    state, path = json.loads(done.stdout.strip().splitlines()[-1])
    return state, path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build made here, by the same command make install runs."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the kernels cannot be built on this machine")
    out = tmp_path_factory.mktemp("native")
    done = subprocess.run([sys.executable, "-m", "gpu_arena.native_build", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return out


def test_a_matching_build_runs_compiled(built: Path) -> None:
    state, path = _probe(built)
    assert state == "compiled" and path.startswith(str(built))


def test_no_build_turned_off_or_for_another_interpreter_runs_the_source(built: Path, tmp_path: Path) -> None:
    assert _probe(tmp_path)[0] == "source: not built (make install builds it)"
    assert _probe(built, GPU_ARENA_NATIVE="0") == ("source: GPU_ARENA_NATIVE=0", str(SOURCE))
    other = tmp_path / "other"
    shutil.copytree(built, other)
    manifest = json.loads((other / native.MANIFEST).read_text())
    (other / native.MANIFEST).write_text(json.dumps({**manifest, "abi": "cpython-313t-x86_64-linux-gnu"}))
    assert _probe(other)[0].startswith("source: not built for this interpreter")
    (other / native.MANIFEST).write_text("{not json")
    assert _probe(other)[0] == "source: not built (make install builds it)"
    (other / native.MANIFEST).write_text(json.dumps({**manifest, "modules": ["a list"]}))
    assert _probe(other)[0].startswith("source: the build did not load (AttributeError")


def test_a_build_older_than_its_source_is_never_run(built: Path, tmp_path: Path) -> None:
    stale = tmp_path / "stale"
    shutil.copytree(built, stale)
    manifest = json.loads((stale / native.MANIFEST).read_text())
    manifest["modules"]["gpu_arena.core.kernels"]["sha256"] = "0" * 64  # as if kernels.py changed since
    (stale / native.MANIFEST).write_text(json.dumps(manifest))
    state, path = _probe(stale)
    assert state == "source: its source changed since the build (make install builds it again)"
    assert path == str(SOURCE)


def test_a_broken_build_runs_the_source(built: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(built, broken)
    entry = json.loads((broken / native.MANIFEST).read_text())["modules"]["gpu_arena.core.kernels"]
    (broken / entry["file"]).write_bytes(b"not an extension module")
    state, path = _probe(broken)
    assert state.startswith("source: the build did not load") and path == str(SOURCE)


def test_a_rebuild_leaves_the_processes_running_the_old_build_alone(built: Path, tmp_path: Path) -> None:
    """make install while a server runs: the server keeps the build it loaded (a shared library
    overwritten in place under a process crashes it)."""
    live = tmp_path / "live"
    shutil.copytree(built, live)
    code = ("import sys; from gpu_arena.core import kernels, native; "
            "print(native.status()['gpu_arena.core.kernels'], flush=True); sys.stdin.readline(); "
            "print(kernels.solve_frontier(((4, 2, 0.9, 3.0), (2, 3, 1.0, 1.0)), ((5, 0, 3, 0.9, 10.0, 0.5),))[4])")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "GPU_ARENA_NATIVE": "1", "GPU_ARENA_NATIVE_DIR": str(live)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "compiled"
        done = subprocess.run([sys.executable, "-m", "gpu_arena.native_build", "--out", str(live), "--quiet"],
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr
        out, _ = proc.communicate("go\n", timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert out.strip() == repr(plain.solve_frontier(((4, 2, 0.9, 3.0), (2, 3, 1.0, 1.0)), ((5, 0, 3, 0.9, 10.0, 0.5),))[4])
    assert sorted(p.name for p in live.iterdir()) == sorted(p.name for p in built.iterdir())  # no build left behind
