"""The Rust engine is built by the package's build (setup.py) and used only while it is the crate
on disk; an installed package checks its modules against the port the build carries."""

from __future__ import annotations

import json
import os
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


def test_a_stale_or_missing_build_is_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "RUST_MODULE", "gpu_arena.native.no_such_build")
    assert "not built" in native._rust()
    stale = ModuleType("gpu_arena_rs")
    stale.CRATE_DIGEST = "0" * 64  # type: ignore[attr-defined]
    monkeypatch.setattr(native, "installed", lambda: stale)
    assert "crate changed" in native._rust()
    stale.CRATE_DIGEST = ""  # type: ignore[attr-defined]  # compiled by cargo alone: it carries no digest
    assert "crate changed" in native._rust()
    monkeypatch.undo()
    monkeypatch.setenv("GPU_ARENA_NATIVE", "0")
    assert native._rust() == "GPU_ARENA_NATIVE=0"


def test_the_build_carries_what_it_was_made_from(rs: ModuleType) -> None:
    """setup.py passes the crate's digest, its files' and the port's manifest into the module."""
    if os.environ.get("GPU_ARENA_RS_SO"):
        pytest.skip("a build named by hand")
    crate = native.crate_dir()
    assert crate is not None
    record = native.build_record(rs)
    assert record["sha256"] == native.crate_digest(crate)
    assert record["sources"] == native.crate_sources(crate)
    assert set(record["mirrors"]) == set(json.loads((crate / "mirrors.json").read_text()))
    assert rs.__name__ == "gpu_arena.native.gpu_arena_rs"  # a submodule of the package


def test_an_installed_package_checks_itself_against_the_port_its_build_carries(
        rs: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a crate beside it (a wheel) the Rust engine plays where the installed modules are the
    ones the build's port manifest names, and names the module that is not."""
    from gpu_arena.native import twin

    if os.environ.get("GPU_ARENA_RS_SO") or isinstance(twin._native_engine(), str):
        pytest.skip("the Rust engine does not run here")
    record = native.build_record(rs)
    monkeypatch.setattr(native, "crate_dir", lambda: None)
    monkeypatch.setattr(twin, "mirror_digests", lambda: dict(record["mirrors"]))
    assert twin._native_engine() is rs
    monkeypatch.setattr(twin, "mirror_digests", lambda: {**record["mirrors"], "core/rules/offers.py": "0" * 64})
    assert "core/rules/offers.py" in str(twin._native_engine())
    monkeypatch.setattr(native, "build_record", lambda module: {"sha256": "", "sources": {}, "mirrors": {}})
    assert "records no mirrors.json" in str(twin._native_engine())


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



def test_info_says_which_engine_plays_and_what_the_build_was_made_from(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from gpu_arena.cli.app import app
    from gpu_arena.native import twin

    res = CliRunner().invoke(app, ["info", "--json"])
    assert res.exit_code == 0, res.output
    facts = json.loads(res.output)
    crate = native.crate_dir()
    assert crate is not None and facts["crate"] == f"native/ ({native.crate_digest(crate)[:16]})"
    if isinstance(twin.native_engine(), ModuleType):
        assert facts["engine (auto)"] == "rust" and facts["built from crate"] == facts["crate"][9:25]
    monkeypatch.setattr(twin, "_ENGINE", ["the reason it does not"])
    monkeypatch.setattr(native, "installed", lambda: "not built (why)")
    facts = json.loads(CliRunner().invoke(app, ["info", "--json"]).output)
    assert facts["engine (auto)"] == "python: the reason it does not" and facts["rust build"] == "not built (why)"
