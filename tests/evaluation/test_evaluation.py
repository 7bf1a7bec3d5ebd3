"""The evaluation harness: deterministic rows, the results.json contract, the store, replays,
and degenerate strategies that must not pay."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app
from gpu_arena.core.policy import PolicyBase, WaitPolicy
from gpu_arena.core.types import Action
from gpu_arena.evaluation import aggregate, bootstrap_ci, paired_differences, play_episode, run_evaluation
from gpu_arena.evaluation.replay import read_jsonl, replay_episode
from gpu_arena.evaluation.store import connect, latest_run, load_replay, save_run
from gpu_arena.policies import policy_names, register_policy

REQUIRED = {"policy", "task", "split", "n", "mean", "std", "ci_low", "ci_high", "welfare_ratio", "deal_rate",
            "breach_rate", "invalid_rate"}


def test_rows_are_deterministic_and_independent_of_workers():
    args = (["rule_expert", "no_negotiation"], ["single_trade", "market_round"], "holdout", [0, 1, 2])
    a = aggregate(run_evaluation(*args, workers=1))
    b = aggregate(run_evaluation(*args, workers=2))
    assert a == b
    assert len(a) == 4 and all(set(r) >= REQUIRED for r in a)
    assert all(r["ci_low"] <= r["mean"] <= r["ci_high"] for r in a)


def test_the_ray_backend_gives_the_same_rows_and_fills_the_optimum_cache(tmp_path, monkeypatch):
    """A private local Ray instance (started and shut down by the call, whatever RAY_ADDRESS says)
    runs the same jobs as the pool, and the CLI runs it and records the backend with the run."""
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # nothing listens there: only --ray-address may connect
    # a policy registered at run time in this process (a Ray worker is a fresh process: it must be
    # shipped with the jobs); a lambda over library classes, as a user's script would write it
    if "patient_test_policy" not in policy_names():
        register_policy("patient_test_policy", lambda seed=0, **_: WaitPolicy())
    args = (["rule_expert", "patient_test_policy"], ["single_trade", "coalition_market"], "holdout", [0, 1])
    optima: dict = {}
    pooled = run_evaluation(*args, workers=1, keep_replays=True)
    on_ray = run_evaluation(*args, workers=2, backend="ray", optima=optima, keep_replays=True)
    assert [asdict(r) for r in on_ray] == [asdict(r) for r in pooled]  # returns, metrics and replays
    assert len(on_ray) == 8 and all(r.replay for r in on_ray)
    assert set(optima) == {(t, "holdout", s) for t in ("single_trade", "coalition_market") for s in (0, 1)}
    import ray

    assert not ray.is_initialized()  # the instance it started is gone
    db, out = tmp_path / "s.db", tmp_path / "results.json"
    res = CliRunner().invoke(app, ["eval", "--policies", "no_negotiation", "--tasks", "single_trade", "--seeds", "2",
                                   "--backend", "ray", "--workers", "1", "--db", str(db), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert latest_run(connect(str(db)))["args"]["backend"] == "ray"


def test_unknown_backends_are_refused_before_any_work():
    with pytest.raises(ValueError, match="unknown backend"):
        run_evaluation(["no_negotiation"], ["single_trade"], "holdout", [0], backend="dask")
    with pytest.raises(ValueError, match="needs backend='ray'"):
        run_evaluation(["no_negotiation"], ["single_trade"], "holdout", [0], ray_address="auto")
    res = CliRunner().invoke(app, ["eval", "--policies", "no_negotiation", "--tasks", "single_trade", "--seeds", "1",
                                   "--backend", "spark"])
    assert res.exit_code != 0 and "unknown backend" in res.output


def test_bootstrap_ci_is_seeded_and_sane():
    xs = [0.1, 0.3, -0.2, 0.5, 0.0, 0.25, 0.05]
    assert bootstrap_ci(xs) == bootstrap_ci(xs)
    lo, hi = bootstrap_ci(xs)
    assert lo < sum(xs) / len(xs) < hi
    assert bootstrap_ci([0.0] * 5) == (0.0, 0.0)


def test_every_episode_replays_to_the_identical_transcript(tmp_path):
    results = run_evaluation(["rule_expert", "random_valid"], ["market_round", "coalition_market"], "train", [3, 4],
                             keep_replays=True)
    for r in results:
        assert r.replay is not None
        again = replay_episode(json.loads(json.dumps(r.replay)))
        assert again.transcript == r.replay["transcript"]
        assert sum(rnd["rewards"]["lab_0"] for rnd in again.transcript) == pytest.approx(r.episode_return, abs=1e-9)


def test_paired_differences_cancel_what_both_policies_share():
    # a shared per-seed swing (the world, the shocks) makes the two intervals overlap, but the
    # policy is better on every seed by 0.01: the paired interval sees it, per-policy ones cannot
    swing = [((i * 7919) % 100) / 100.0 - 0.5 for i in range(60)]
    rows = [("a", "t", "holdout", i, x + 0.01) for i, x in enumerate(swing)]
    rows += [("b", "t", "holdout", i, x) for i, x in enumerate(swing)]
    rows += [("c", "t", "holdout", i, x + 0.01) for i, x in enumerate(swing[:30])]
    lo_a, _hi_a = bootstrap_ci([r[4] for r in rows if r[0] == "a"])
    _lo_b, hi_b = bootstrap_ci([r[4] for r in rows if r[0] == "b"])
    assert lo_a < hi_b  # overlapping per-policy intervals
    paired = {p["versus"]: p for p in paired_differences(rows, "a")}
    assert paired["b"]["ci_low"] > 0.0099 and paired["b"]["wins"] == 60 and paired["b"]["losses"] == 0
    assert paired["c"]["n"] == 30 and paired["c"]["mean_diff"] == pytest.approx(0.0)  # only shared seeds
    assert paired_differences(rows, "nobody") == []


def test_store_round_trip(tmp_path):
    con = connect(tmp_path / "a.db")
    results = run_evaluation(["no_negotiation"], ["single_trade"], "holdout", [0, 1], keep_replays=True)
    rows = aggregate(results)
    run_id = save_run(con, kind="eval", args={"x": 1}, seeds=[0, 1], rows=rows, episodes=results, duration_s=1.0)
    run = latest_run(con)
    assert run is not None and run["id"] == run_id and run["results"] == json.loads(json.dumps(rows))
    assert run["versions"]["python"] and "openenv" in run["versions"]
    assert load_replay(con, run_id, "no_negotiation", "single_trade", 1)["seed"] == 1


def test_cli_eval_report_and_replay(tmp_path):
    runner = CliRunner()
    db, out, rep = tmp_path / "s.db", tmp_path / "results.json", tmp_path / "r.jsonl"
    res = runner.invoke(app, ["eval", "--policies", "rule_expert,no_negotiation", "--tasks", "single_trade",
                              "--split", "holdout", "--seeds", "3", "--workers", "1", "--out", str(out),
                              "--replays", str(rep), "--db", str(db)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert {r["policy"] for r in data["results"]} == {"rule_expert", "no_negotiation"}
    assert all(set(r) >= REQUIRED for r in data["results"])
    assert len(list(read_jsonl(rep))) == 6
    assert [(p["policy"], p["versus"], p["n"]) for p in data["paired"]] == [("rule_expert", "no_negotiation", 3)]
    assert "rule_expert − no_negotiation" in res.output
    assert "engine: rust (" in res.output  # which engine played the run's episodes, one line
    assert all(sum(r["engines"][e] for e in ("rust", "python")) == r["n"] for r in data["results"])
    res = runner.invoke(app, ["report", "--db", str(db), "--out-dir", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    assert "Paired by seed against rule_expert" in (tmp_path / "rep" / "report.md").read_text()
    for name in ("report.md", "results.png", "results.html"):
        assert (tmp_path / "rep" / name).stat().st_size > 0
    res = runner.invoke(app, ["replay", str(rep), "--index", "4"])
    assert res.exit_code == 0 and "replay identical" in res.output
    res = runner.invoke(app, ["eval", "--policies", "nobody", "--tasks", "single_trade", "--seeds", "1",
                              "--db", str(db), "--out", str(out)])
    assert res.exit_code != 0


# ----------------------------------------------------------------------------- degenerate strategies

class Scripted(PolicyBase):
    """A degenerate strategy: the same kind of move every round."""

    uses_aids = False

    def __init__(self, make, **_):
        self.make = make
        self.t = 0

    def act(self, obs):
        self.t += 1
        return self.make(obs, self.t)


def _others(obs):
    return [lab.lab_id for lab in obs.visible_labs if lab.lab_id != obs.controlled_lab_id]


def _coalition_spam(obs, t):
    others = _others(obs)
    pooled = [j for j in obs.private_jobs if j.pooled] or obs.private_jobs
    theirs = [b.block_id for b in obs.public_market.blocks if b.owner == others[0]][:2]
    return Action("form_coalition", job_id=pooled[0].job_id, member_lab_ids=(others[0],), requested_block_ids=tuple(theirs),
                  shares={obs.controlled_lab_id: 0.5, others[0]: 0.5})


def _reserve_loop(obs, t):
    mine = [b.block_id for b in obs.owned_blocks if b.status in ("free", "reserved")]
    jobs = [j.job_id for j in obs.private_jobs if j.status == "open"]
    if t % 2 and mine and jobs:
        return Action("reserve_capacity", block_ids=(), job_id=jobs[0])  # empty reservation
    return Action("release_capacity", block_ids=())


def _ask_everything(obs, t):
    others = _others(obs)
    target = others[t % len(others)]
    theirs = tuple(b.block_id for b in obs.public_market.blocks if b.owner == target and b.tradeable)[:16]
    return Action("send_offer", target_lab_id=target, requested_block_ids=theirs or ("b_0_0",))


def _same_offer(obs, t):
    others = _others(obs)
    return Action("send_offer", target_lab_id=others[0], payment=0.01)


DEGENERATE = {
    "degenerate_wait": lambda obs, t: Action("wait"),
    "degenerate_coalition_spam": _coalition_spam,
    "degenerate_reserve_loop": _reserve_loop,
    "degenerate_ask_everything": _ask_everything,
    "degenerate_same_offer": _same_offer,
}
for _name, _make in DEGENERATE.items():
    register_policy(_name, lambda seed=0, _make=_make, **_: Scripted(_make))


@pytest.mark.parametrize("task", ["single_trade", "market_round", "coalition_market"])
def test_degenerate_strategies_do_not_pay(task):
    seeds = list(range(30))
    rows = {r["policy"]: r for r in aggregate(run_evaluation(["no_negotiation", *DEGENERATE], [task], "holdout", seeds))}
    ceiling = rows["no_negotiation"]["ci_high"]
    for name in DEGENERATE:
        assert rows[name]["mean"] <= ceiling + 1e-12, (name, rows[name]["mean"], ceiling)


def test_play_episode_reports_invalid_actions():
    r = play_episode("degenerate_reserve_loop", "single_trade", "train", 0)
    assert r.invalid_actions > 0 and r.invalid_rate > 0
    assert r.columns["invalid_action_penalty"] < 0


def test_optimum_cache_is_keyed_by_world_fingerprint(tmp_path):
    from gpu_arena.evaluation.store import load_optima, save_optima

    optima: dict = {}
    first = run_evaluation(["no_negotiation"], ["market_round"], "holdout", [0, 1], optima=optima)
    assert set(optima) == {("market_round", "holdout", 0), ("market_round", "holdout", 1)}
    con = connect(tmp_path / "o.db")
    save_optima(con, optima)
    assert load_optima(con) == optima
    # a cached value is used only for the exact same world
    fp, value = optima[("market_round", "holdout", 0)]
    poisoned = {("market_round", "holdout", 0): (fp, value * 2), ("market_round", "holdout", 1): ("stale", 1.0)}
    again = run_evaluation(["no_negotiation"], ["market_round"], "holdout", [0, 1], optima=poisoned)
    assert again[0].optimum == value * 2
    assert again[1].optimum == first[1].optimum


def test_the_pool_spawns_workers_once_torch_has_run_here():
    """Workers forked from a process whose torch thread pool has run hang on their first matmul
    (the training pipeline's evaluation did); the pool spawns them instead, in a fresh process so
    this test's own imports do not decide it."""
    import subprocess
    import sys

    code = (
        "import torch\n"
        "torch.matmul(torch.randn(256, 256), torch.randn(256, 256))\n"
        "from gpu_arena.evaluation import runner\n"
        "assert runner._pool_context().get_start_method() == 'spawn'\n"
        "rs = runner.run_evaluation(['no_negotiation', 'wait'],\n"
        "                           ['single_trade'], 'holdout', [0, 1], workers=2)\n"
        "print(len(rs))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().endswith("4")


def test_self_play_puts_the_policy_in_every_seat_and_reports_each_seats_return(tmp_path) -> None:
    from gpu_arena.env import GpuArenaEnv
    from gpu_arena.rollout import play_seat

    result = play_episode("rule_expert", "market_round", "train", 4, opponents="self")
    assert set(result.seat_returns or {}) == {"lab_0", "lab_1", "lab_2"}
    assert result.seat_returns["lab_0"] == result.episode_return
    # the same as naming the policy for the other seats by hand: one instance of it per seat
    env = GpuArenaEnv(task="market_round", split="train", opponents="rule_expert")
    env.reset(seed=4)
    assert {type(p).__name__ for p in env.policies.values()} == {"RuleExpertPolicy"}
    from gpu_arena.policies import make_policy

    play_seat(env, make_policy("rule_expert", seed=4))
    assert env.episode is not None and dict(env.episode.returns) == result.seat_returns
    res = CliRunner().invoke(app, ["eval", "--policies", "rule_expert,no_negotiation", "--tasks", "single_trade",
                                   "--seeds", "3", "--opponents", "self", "--out", str(tmp_path / "r.json"),
                                   "--db", str(tmp_path / "a.db")])
    assert res.exit_code == 0, res.output
    assert "Self-play: every seat's return" in res.output and "each policy against itself" in res.output
    stored = json.loads((tmp_path / "r.json").read_text())
    assert stored["args"]["opponents"] == "self"


def test_the_store_keeps_only_replays_standard_json_can_carry(tmp_path) -> None:
    import math

    from gpu_arena.evaluation.report import markdown_table
    from gpu_arena.evaluation.store import connect, replay_text, save_served_episode

    assert replay_text({"transcript": [{"actions": {"lab_0": {"action_type": "wait"}}}]}) is not None
    # NaN and Infinity (which SQLite's JSON functions refuse: one such row hid every stored episode)
    # and a lone surrogate (no UTF-8 for it) are not kept
    for odd in (math.nan, math.inf, "\ud800"):
        assert replay_text({"transcript": [{"note": odd}]}) is None
    con = connect(tmp_path / "a.db")
    record = {"replay_id": "r1", "created_at": "2026-01-01T00:00:00Z", "task": "single_trade", "split": "train",
              "seed": 1, "seat": "lab_0", "transcript": [], "episode_return": 0.0}
    assert save_served_episode(con, record)
    assert not save_served_episode(con, {**record, "replay_id": "r2", "episode_return": math.nan})
    rows = con.execute("SELECT replay_id, json_array_length(replay, '$.transcript') FROM served_episodes").fetchall()
    assert rows == [("r1", 0)]
    # a policy's name is text in the report's table, never markup or a new cell
    table = markdown_table([{"task": "t", "split": "s", "policy": "<a href='x'>p</a>|q", "n": 1, "mean": 0.0,
                             "ci_low": 0.0, "ci_high": 0.0, "welfare_ratio": 1.0, "surplus_over_batna": 0.0, "deal_rate": 0.0,
                             "breach_rate": 0.0, "invalid_rate": 0.0}])
    assert "<a" not in table and "&lt;a href=&#x27;x&#x27;&gt;p&lt;/a&gt;\\|q" in table


def test_gain_shares_split_each_deals_joint_gain_and_the_row_keeps_them() -> None:
    from types import SimpleNamespace

    from gpu_arena.evaluation.stats import deal_gain_shares

    def deal(labs, gains):
        return SimpleNamespace(kind="deal", data={"labs": labs, "gains": gains})

    events = [deal(["lab_0", "lab_1"], [3.0, 1.0]), deal(["lab_2", "lab_0"], [2.0, -1.0]),
              deal(["lab_0", "lab_1"], [0.0, 0.0]),  # nothing to split: left out
              deal(["lab_1", "lab_2"], [5.0, 5.0]),  # not lab_0's deal
              SimpleNamespace(kind="offer", data={"labs": ["lab_0", "lab_1"], "gains": [1.0, 1.0]})]
    assert deal_gain_shares(events, "lab_0") == pytest.approx([0.75, -1.0])
    assert deal_gain_shares(events, "lab_2") == pytest.approx([2.0, 0.5])
    # rule_expert trades on single_trade holdout seeds: its rows carry the shares of the deals it
    # settled, and the aggregate their mean over every deal of the group (None without a deal)
    rows = [play_episode(p, "single_trade", "holdout", s) for p in ("rule_expert", "no_negotiation") for s in range(6)]
    expert = [s for r in rows if r.policy == "rule_expert" for s in r.gain_shares]
    assert expert, "rule_expert settled no deal in six single_trade worlds"
    assert all(not r.gain_shares for r in rows if r.policy == "no_negotiation")
    agg = {a["policy"]: a for a in aggregate(rows)}
    assert agg["rule_expert"]["gain_share"] == pytest.approx(sum(expert) / len(expert))
    assert agg["no_negotiation"]["gain_share"] is None


def test_a_source_copy_without_git_names_its_commit_from_the_environment(tmp_path) -> None:
    """A long run plays from a copy of the source (edits to the checkout cannot reach it): no .git,
    so the commit its evidence records comes from $GPU_ARENA_COMMIT."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import gpu_arena

    package = Path(gpu_arena.__file__).resolve().parent
    shutil.copytree(package, tmp_path / "copy" / "src" / "gpu_arena", ignore=shutil.ignore_patterns("__pycache__"))
    code = f"import gpu_arena.evaluation.store as s; print(s.__file__.startswith({str(tmp_path)!r}), s.git_commit())"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "copy" / "src"),
           "GIT_CEILING_DIRECTORIES": str(tmp_path)}

    def commit(**extra: str) -> str:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, **extra},
                              cwd=tmp_path, check=True)
        return done.stdout.strip()

    assert commit() == "True None"
    assert commit(GPU_ARENA_COMMIT="0123abc") == "True 0123abc"
