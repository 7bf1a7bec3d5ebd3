"""The Rust engine's build is used only while it matches the crate on disk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from gpu_arena.native import loader as native


def test_the_digest_follows_every_source_of_the_crate(tmp_path: Path) -> None:
    crate = native.crate_dir()
    assert crate is not None
    copy = tmp_path / "native"
    shutil.copytree(crate, copy, ignore=shutil.ignore_patterns("target"))
    before = native.crate_digest(copy)
    assert before == native.crate_digest(crate)
    lib = copy / "src" / "lib.rs"
    lib.write_text(lib.read_text() + "\n// an edit\n")
    assert native.crate_digest(copy) != before
    lib.unlink()
    assert native.crate_digest(copy) != before


def test_a_stale_or_missing_build_is_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_ARENA_NATIVE_DIR", str(tmp_path))
    assert "not built" in native._rust()
    (tmp_path / native.RUST_MANIFEST).write_text(json.dumps({"abi": native.interpreter_tag(), "sha256": "0" * 64,
                                                             "file": "gpu_arena_rs-x.so"}))
    assert "crate changed" in native._rust()
    (tmp_path / native.RUST_MANIFEST).write_text(json.dumps({"abi": "cpython-27", "sha256": "0", "file": "x"}))
    assert "interpreter" in native._rust()
    monkeypatch.setenv("GPU_ARENA_NATIVE", "0")
    assert native._rust() == "GPU_ARENA_NATIVE=0"


def test_the_installed_build_is_the_crate_as_it_is(rs: ModuleType) -> None:
    # the fixture loads it through native.rust() unless a test run names another build
    assert hasattr(rs, "Episode") and hasattr(rs, "world_roundtrip")


def test_an_edited_rule_turns_the_rust_engine_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_arena.env import GpuArenaEnv
    from gpu_arena.native import twin
    from gpu_arena.native.episode import NativeEpisode

    digests = twin.mirror_digests()
    if isinstance(twin._native_engine(), str):
        pytest.skip("the Rust engine does not run here")
    monkeypatch.setattr(twin, "mirror_digests", lambda: {**digests, "core/rules/offers.py": "0" * 64})
    assert "core/rules/offers.py" in twin._native_engine()
    monkeypatch.setattr(twin, "_ENGINE", [])  # as a fresh process would find it
    env = GpuArenaEnv(task="single_trade", engine="auto")
    with pytest.warns(twin.StaleTwinWarning, match="core/rules/offers.py"):  # loudly, naming it
        env.reset(seed=0)
    assert not isinstance(env.episode, NativeEpisode)  # the Python core plays

