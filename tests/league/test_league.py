"""The league: rating updates against hand-computed cases, a reproducible schedule, resumable runs,
the expected ordering of scripted entrants, and the CLI's table and JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app
from gpu_arena.core.worldgen import generate_world
from gpu_arena.league import rate, run_league, scheduled
from gpu_arena.league.ratings import _ranks
from gpu_arena.league.schedule import SELF_PLAY_EVERY
from gpu_arena.league.store import connect_league, load_matches

FIVE = ["rule_expert", "random_valid", "no_negotiation", "always_accept", "greedy_hoarder"]


def match(index: int, surpluses: dict[str, float], self_play: bool = False) -> dict[str, object]:
    seats = [{"lab": f"lab_{i}", "entrant": e, "surplus": s, "episode_return": 0.0, "deals": 0, "invalid_actions": 0}
             for i, (e, s) in enumerate(surpluses.items())]
    return {"index": index, "self_play": self_play, "seats": seats}


def test_one_win_moves_both_ratings_as_plackett_luce_says() -> None:
    # two fresh players (mu 25, sigma 25/3, beta = sigma/2, the dynamics tau = mu/300 added to the
    # variance first): c² = 2(σ² + τ²) + 2β²; the winner's mu rises by (σ² + τ²)/c · (1 − p) with
    # p = 1/2 (equal ratings), the loser's falls by the same
    sigma, beta, tau = 25 / 3, 25 / 6, 25 / 300
    var = sigma**2 + tau**2
    c = math.sqrt(2 * var + 2 * beta**2)
    step = var / c * 0.5
    table = {r["name"]: r for r in rate([match(0, {"a": 3.0, "b": -1.0})], ["a", "b"])["entrants"]}
    assert table["a"]["mu"] == pytest.approx(25 + step, abs=1e-9)
    assert table["b"]["mu"] == pytest.approx(25 - step, abs=1e-9)
    assert table["a"]["sigma"] < sigma and table["b"]["sigma"] < sigma
    assert table["a"]["conservative"] == pytest.approx(table["a"]["mu"] - 3 * table["a"]["sigma"])
    # a tie shares the rank: both stay level
    tied = {r["name"]: r for r in rate([match(0, {"a": 1.0, "b": 1.0})], ["a", "b"])["entrants"]}
    assert tied["a"]["mu"] == pytest.approx(tied["b"]["mu"])
    assert _ranks([5.0, 1.0, 5.0, -2.0]) == [1.0, 3.0, 1.0, 4.0]


def test_self_play_matches_do_not_move_ratings_and_archetype_seats_are_not_rated() -> None:
    records = [match(0, {"a": 2.0, "b": 1.0, "archetypes": 9.0}), match(1, {"a": 5.0, "a2": 5.0}, self_play=True)]
    records[1]["seats"] = [dict(s, entrant="a") for s in records[1]["seats"]]  # type: ignore[index,union-attr]
    out = rate(records, ["a", "b"])
    table = {r["name"]: r for r in out["entrants"]}
    assert set(table) == {"a", "b"} and table["a"]["matches"] == 1 and table["a"]["self_play"]["n"] == 2
    assert table["a"]["self_play"]["mean"] == 5.0
    only_cross = {r["name"]: r for r in rate(records[:1], ["a", "b"])["entrants"]}
    assert table["a"]["mu"] == only_cross["a"]["mu"]
    assert [(c["entrant"], c["opponent"], c["n"]) for c in out["cross_play"]] == [("a", "b", 1), ("b", "a", 1)]


def test_the_schedule_is_reproducible_rotates_seats_and_plays_self_play_in_turn() -> None:
    first = [scheduled(FIVE, ["market_round", "coalition_market"], 3, k) for k in range(40)]
    assert first == [scheduled(list(reversed(FIVE)), ["market_round", "coalition_market"], 3, k) for k in range(40)]
    for m in first:
        labs = set(generate_world(m.task, m.split, m.seed).labs)
        seats = dict(m.seats)
        assert set(seats) <= labs and m.split == "holdout"
        if m.self_play:
            assert m.index % SELF_PLAY_EVERY == SELF_PLAY_EVERY - 1 and set(seats) == labs and len(m.entrants) == 1
        else:  # distinct entrants, as many as the world has seats
            assert len(m.entrants) == len(seats) == min(len(FIVE), len(labs))
    assert {m.task for m in first} == {"market_round", "coalition_market"}
    assert len({m.seed for m in first}) == len(first)
    assert {m.entrants[0] for m in first if m.self_play} == set(FIVE)  # every entrant's self-play comes up
    assert len({frozenset(m.entrants) for m in first if not m.self_play}) > 3  # pairings vary
    with pytest.raises(ValueError):
        scheduled(["a", "a"], ["market_round"], 0, 0)


def test_a_league_resumes_without_repeating_a_match_and_ranks_rule_expert_above_random(tmp_path: Path) -> None:
    db = str(tmp_path / "arena.db")
    once = run_league(FIVE, ["market_round"], 200, 11, db=str(tmp_path / "once.db"))
    run_league(FIVE, ["market_round"], 120, 11, db=db)
    twice = run_league(FIVE, ["market_round"], 80, 11, db=db, workers=2)
    assert twice["played"] == 80 and twice["total"] == 200
    con = connect_league(db)
    indices = [r["index"] for r in load_matches(con, twice["league"])]
    con.close()
    assert indices == list(range(200))
    # the ratings are a function of the matches: two runs equal one run of the same matches
    assert twice["entrants"] == once["entrants"]
    order = [r["name"] for r in once["entrants"]]
    assert order.index("rule_expert") < order.index("random_valid")
    assert sum(r["matches"] for r in once["entrants"]) == sum(
        len([s for s in m["seats"] if s["entrant"] != "archetypes"]) for m in load_matches(
            connect_league(str(tmp_path / "once.db")), once["league"]) if not m["self_play"])


def test_league_cli_prints_a_table_that_fits_80_columns_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    db = str(tmp_path / "arena.db")
    runner = CliRunner()
    res = runner.invoke(app, ["league", "run", "--entrants", "rule_expert,random_valid,no_negotiation",
                              "--tasks", "single_trade", "--matches", "15", "--db", db, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert {"name", "mu", "sigma", "matches"} <= set(out["entrants"][0]) and len(out["entrants"]) == 3
    shown = runner.invoke(app, ["league", "show", "--db", db, "--cross-play"])
    assert shown.exit_code == 0, shown.output
    assert "rule_expert" in shown.output and "Cross-play" in shown.output
    assert max(len(line) for line in shown.output.splitlines()) <= 80
    bad = runner.invoke(app, ["league", "run", "--entrants", "rule_expert,nobody", "--matches", "1", "--db", db])
    assert bad.exit_code == 2 and "nobody" in bad.output
    empty = runner.invoke(app, ["league", "show", "--db", str(tmp_path / "none.db")])
    assert empty.exit_code == 1 and "no league" in empty.output


def test_grpo_draws_its_opponents_from_the_leagues_best(tmp_path: Path) -> None:
    from gpu_arena.league import league_pool
    from gpu_arena.training.arena_env import ArenaToolEnv
    from gpu_arena.training.grpo import GRPORun, prompt_rows, with_opponent_pool
    from gpu_arena.training.presets import PresetError

    db = str(tmp_path / "arena.db")
    with pytest.raises(PresetError, match="no league"):
        with_opponent_pool(GRPORun(output_dir=str(tmp_path / "o"), opponents="league:top2", db=db))
    table = run_league(["rule_expert", "random_valid", "no_negotiation"], ["single_trade"], 30, 1, db=db)
    best = [r["name"] for r in table["entrants"][:2]]
    assert league_pool("league:top2", db) == best and "random_valid" not in best
    with pytest.raises(ValueError, match="topK"):
        league_pool("league:best", db)
    run = with_opponent_pool(GRPORun(output_dir=str(tmp_path / "o"), opponents="league:top2", db=db,
                                     seeds=tuple(range(40))))
    assert run.opponent_pool == tuple(best)
    rows = prompt_rows(run.tasks, run.split, run.seeds, run.opponent_pool, run.seed)
    assert {r["opponents"] for r in rows} == set(best)  # the worlds spread over the pool
    assert rows == prompt_rows(run.tasks, run.split, run.seeds, run.opponent_pool, run.seed)
    # a rollout of a row meets the row's opponents in every other seat
    env = ArenaToolEnv()
    env.reset(**{k: rows[0][k] for k in ("task", "split", "seed", "opponents")})
    inner = env._backend.env  # type: ignore[union-attr]
    assert {type(p).__name__ for p in inner.policies.values()} == {
        {"rule_expert": "RuleExpertPolicy", "no_negotiation": "NoNegotiationPolicy"}[rows[0]["opponents"]]}


def test_bargaining_metrics_split_each_deals_joint_gain_and_count_losing_sides(tmp_path: Path) -> None:
    rec = match(0, {"a": 1.0, "b": 0.0, "c": 0.0})
    rec["deals"] = [{"round": 0, "labs": ["lab_0", "lab_1"], "gains": [3.0, 1.0]},
                    {"round": 1, "labs": ["lab_1", "lab_2"], "gains": [4.0, -1.0]},
                    {"round": 2, "labs": ["lab_0", "lab_2"], "gains": [-1.0, 0.5]}]  # lost joint gain
    table = {r["name"]: r["bargaining"] for r in rate([rec], ["a", "b", "c"])["entrants"]}
    assert table["a"]["deals"] == 2 and table["a"]["gain_share"]["mean"] == pytest.approx(0.75)
    assert table["b"]["gain_share"]["mean"] == pytest.approx((0.25 + 4 / 3) / 2)
    assert table["c"]["ir_violations"] == 1 and table["a"]["ir_violations"] == 1
    assert table["c"]["gain_share"]["n"] == 1  # a deal that lost joint gain has no shares
    # in played matches every settled deal is recorded once, with both sides' gains
    out = run_league(FIVE, ["market_round"], 30, 2, db=str(tmp_path / "a.db"))
    con = connect_league(str(tmp_path / "a.db"))
    records = load_matches(con, out["league"])
    con.close()
    for r in records:
        assert len(r["deals"]) * 2 == sum(s["deals"] for s in r["seats"])
        assert all(d["left_on_table"] is not None and d["left_on_table"] >= 0 for d in r["deals"])
        assert all(len(d["gains"]) == 2 and all(math.isfinite(g) for g in d["gains"]) for d in r["deals"])
    assert sum(len(r["deals"]) for r in records) > 0


def test_a_deal_that_pooled_the_right_blocks_left_nothing_on_the_table() -> None:
    from gpu_arena.league.play import left_on_table

    # one 8-hour job worth 40 and one block that fits it: the plans already use it (net 40 − 2)
    job, block = [8, 0, 9, 0.0, 40.0, 0.5], [8, 3, 0.9, 2.0]
    assert left_on_table({"blocks": [block], "jobs": [job], "budget": 10.0, "net": 38.0}) == 0.0
    # the same holdings, but the plans leave the block idle: 38 left on the table
    assert left_on_table({"blocks": [block], "jobs": [job], "budget": 10.0, "net": 0.0}) == pytest.approx(38.0)
    assert left_on_table({"blocks": [block], "jobs": [], "budget": 10.0, "net": 0.0}) == 0.0


def test_a_league_on_ray_plays_the_same_matches_as_the_process_pool(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    local = run_league(FIVE[:3], ["single_trade"], 6, 4, db=str(tmp_path / "p.db"))
    on_ray = run_league(FIVE[:3], ["single_trade"], 6, 4, db=str(tmp_path / "r.db"), workers=1, backend="ray")
    assert on_ray["entrants"] == local["entrants"] and on_ray["cross_play"] == local["cross_play"]
    with pytest.raises(ValueError, match="backend"):
        run_league(FIVE[:3], ["single_trade"], 1, 4, db=str(tmp_path / "x.db"), backend="slurm")
