"""The pipeline's select stage: the trained model chosen among the RL stage's saved checkpoints on the
validation range's last seeds, by its worst task's paired t against the SFT start (training.selection)."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpu_arena.cli import app
from gpu_arena.evaluation.ranges import get_range
from gpu_arena.training.evidence import markdown_report
from gpu_arena.training.pipeline import PipelineRun, run_pipeline
from gpu_arena.training.presets import PresetError
from gpu_arena.training.selection import (
    Candidate,
    candidates,
    choose,
    load_selection,
    score,
    selection_seeds,
    t_statistic,
)

TASKS = ("single_trade", "market_round")


def returns(values: dict[str, list[float]]) -> dict[tuple[str, int], float]:
    return {(task, seed): v for task, vs in values.items() for seed, v in enumerate(vs)}


def cand(name: str, iteration: int) -> Candidate:
    return Candidate(name, iteration, Path(name))


def test_the_choice_plays_the_validation_ranges_last_seeds() -> None:
    validation = get_range("validation")
    assert selection_seeds(3) == [9_997, 9_998, 9_999]
    # the evaluation plays the range's first seeds: the two share none while they fit the range together
    assert not set(selection_seeds(100)) & set(validation.seeds(100))
    assert set(selection_seeds(100)) <= set(range(validation.start, validation.last + 1))
    with pytest.raises(ValueError, match="holds 10,000 seeds"):
        selection_seeds(0)


def test_t_statistic() -> None:
    assert t_statistic([1.0, 2.0, 3.0]) == pytest.approx(2.0 / (1.0 / math.sqrt(3)))
    assert t_statistic([0.0, 0.0]) == 0.0
    assert t_statistic([0.5, 0.5]) == math.inf and t_statistic([-0.5]) == -math.inf
    # rounding is not spread: equal differences at any scale have none
    assert t_statistic([0.1 + 0.2, 0.3, 0.3]) == math.inf and t_statistic([3e-20, 3e-20 + 1e-36]) == math.inf
    with pytest.raises(ValueError, match="no paired seeds"):
        t_statistic([])


def test_the_worst_task_decides_and_a_tie_goes_to_the_earlier_checkpoint() -> None:
    start = returns({"single_trade": [0.1, 0.2, 0.3, 0.4], "market_round": [0.0, 0.0, 0.1, 0.1]})
    # big gain on one task, a loss on the other; small gains on both; the same small gains again
    lopsided = returns({"single_trade": [0.5, 0.6, 0.8, 0.8], "market_round": [0.0, -0.01, 0.09, 0.1]})
    even = returns({"single_trade": [0.11, 0.22, 0.31, 0.42], "market_round": [0.01, 0.0, 0.12, 0.11]})
    record = choose(start, [(cand("rl/checkpoint-2", 2), lopsided), (cand("rl/checkpoint-4", 4), even),
                            (cand("rl", 6), even)], TASKS)
    assert record["chosen"] == "rl/checkpoint-4" and record["chosen_iteration"] == 4
    rows = {r["name"]: r for r in record["candidates"]}
    assert rows["rl/checkpoint-2"]["score"] < 0 < rows["rl/checkpoint-4"]["score"] == rows["rl"]["score"]
    assert rows["rl/checkpoint-2"]["per_task"]["single_trade"]["mean_diff"] == pytest.approx(0.425)
    assert rows["rl"]["per_task"]["market_round"]["n"] == 4
    with pytest.raises(ValueError, match="no checkpoint"):
        choose(start, [], TASKS)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-1, 1), st.floats(-1, 1)), min_size=2, max_size=12),
       st.floats(0.01, 100), st.floats(0.001, 1))
def test_the_score_is_blind_to_a_tasks_scale_and_rises_with_a_uniform_gain(
        pairs: list[tuple[float, float]], scale: float, gain: float) -> None:
    start = {("single_trade", i): a for i, (a, _) in enumerate(pairs)}
    other = {("single_trade", i): b for i, (_, b) in enumerate(pairs)}
    s, _ = score(start, other, ("single_trade",))
    scaled, _ = score({k: v * scale for k, v in start.items()}, {k: v * scale for k, v in other.items()},
                      ("single_trade",))
    if math.isfinite(s):
        assert scaled == pytest.approx(s, rel=1e-6, abs=1e-6)
    better, _ = score(start, {k: v + gain for k, v in other.items()}, ("single_trade",))
    assert better >= s or math.isclose(better, s, rel_tol=1e-9)
    # whatever the candidates, the chosen one's score is the highest
    record = choose(start, [(cand("a", 1), other), (cand("b", 2), {k: v + gain for k, v in other.items()})],
                    ("single_trade",))
    assert max(r["score"] for r in record["candidates"]) == next(
        r["score"] for r in record["candidates"] if r["name"] == record["chosen"])


def test_candidates_are_the_saved_checkpoints_then_the_final_one(tmp_path: Path) -> None:
    rl = tmp_path / "rl"
    for name in ("checkpoint-8", "checkpoint-4", "checkpoint-x", "notes"):
        (rl / name).mkdir(parents=True)
        (rl / name / "config.json").write_text("{}")
    (rl / "checkpoint-12").mkdir()  # no config.json: not a checkpoint
    found = candidates(rl, 12)
    assert [(c.name, c.iteration) for c in found] == [("rl/checkpoint-4", 4), ("rl/checkpoint-8", 8), ("rl", 12)]
    assert load_selection(tmp_path) is None
    (tmp_path / "select.json").write_text("not json")
    assert load_selection(tmp_path) is None


@pytest.mark.parametrize(("changes", "says"), [
    ({"rl_select": 10}, "--rl-select chooses among RFT's saved checkpoints: it needs --rl-save-every"),
    ({"rl_select": 10, "rl_save_every": 2, "rl_iterations": 2}, "needs --rl-save-every N with N below --rl-steps"),
    ({"rl_select": 10, "rl_save_every": 1, "rl_iterations": 2, "rl_method": "grpo"}, "--rl-save-every is RFT's"),
    ({"rl_select": 5_001, "rl_save_every": 1, "rl_iterations": 2}, "1 to 5,000 validation seeds"),
    ({"rl_select": 5_000, "rl_save_every": 1, "rl_iterations": 2, "eval_seeds": 5_001}, "would share validation"),
])
def test_the_select_stage_refuses_what_it_cannot_do(tmp_path: Path, changes: dict[str, Any], says: str) -> None:
    with pytest.raises(PresetError, match=says):
        run_pipeline(PipelineRun(output=str(tmp_path / "x"), preset="tiny", **changes))
    assert not (tmp_path / "x").exists()
    # on the test range the evaluation's seeds are another range's: only the size of the choice is bounded
    PipelineRun(output="o", preset="tiny", rl_select=5_000, rl_save_every=1, rl_iterations=2, eval_seeds=9_000,
                eval_range="test").resolved().validate()


def test_the_command_line_repeats_the_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpu_arena.training.pipeline as pipeline

    run = PipelineRun(output=str(tmp_path / "o"), preset="tiny", rl_iterations=4, rl_save_every=2, rl_select=50,
                      from_stage="select")
    cmd = run.command_line()
    assert "--rl-save-every 2 --rl-select 50" in cmd
    seen: list[PipelineRun] = []
    monkeypatch.setattr(pipeline, "run_pipeline", lambda r, display=None: seen.append(r) or {"stages": {}})
    res = CliRunner().invoke(app, [*shlex.split(cmd)[1:], "--from-stage", "select"])
    assert res.exit_code == 0, res.output
    assert seen == [run]


def test_a_tiny_run_reports_the_checkpoint_it_chose(tmp_path: Path) -> None:
    out, db = tmp_path / "run", str(tmp_path / "arena.db")
    run = PipelineRun(output=str(out), preset="tiny", db=db, workers=1, rl_iterations=2, rl_save_every=1,
                      rl_select=2, eval_seeds=2, baselines=("no_negotiation", "rule_expert"))
    run_pipeline(run)
    state = json.loads((out / "pipeline.json").read_text())
    assert list(state["stages"]) == ["data", "sft", "rl", "select", "eval"]
    assert state["stages"]["select"]["status"] == "finished"
    selection = json.loads((out / "select.json").read_text())
    assert selection["seeds"] == [9_998, 9_999] and selection["range"] == "validation"
    assert [c["name"] for c in selection["candidates"]] == ["rl/checkpoint-1", "rl"]
    best = max(c["score"] for c in selection["candidates"])
    assert next(c for c in selection["candidates"] if c["name"] == selection["chosen"])["score"] == best
    evidence = json.loads((out / "evidence.json").read_text())
    assert evidence["selection"] == selection
    assert f"{out / selection['chosen']}?" in evidence["policies"]["trained"]
    assert evidence["seeds"]["holdout"] == [0, 1] and "select" in evidence["wall_s"]
    assert f"trained = {selection['chosen']} (after RL iteration" in markdown_report(evidence)
    assert "--rl-select 2" in evidence["command"]

    # the same run without the choice: the select stage is skipped (no row) and the final checkpoint is the
    # trained one
    again = PipelineRun(**{**run.__dict__, "rl_select": None, "from_stage": "select"})
    run_pipeline(again)
    state = json.loads((out / "pipeline.json").read_text())
    assert list(state["stages"]) == ["data", "sft", "rl", "eval"] and not (out / "select.json").exists()
    evidence = json.loads((out / "evidence.json").read_text())
    assert evidence["selection"] is None and "select" not in evidence["wall_s"]
    assert f"{out / 'rl'}?" in evidence["policies"]["trained"]
    # an RL stage that runs again makes the earlier choice stale
    (out / "select.json").write_text(json.dumps(selection))
    run_pipeline(PipelineRun(**{**run.__dict__, "rl_select": None, "from_stage": "rl", "to_stage": "rl"}))
    assert not (out / "select.json").exists()
    # the select stage alone, from the CLI: it prints its stages, not an earlier evaluation's evidence
    (out / "evidence.json").unlink()
    res = CliRunner().invoke(app, ["train", "pipeline", "--preset", "tiny", "--output", str(out), "--db", db,
                                   "--workers", "1", "--rl-steps", "2", "--rl-save-every", "1", "--rl-select", "2",
                                   "--eval-seeds", "2", "--from-stage", "select", "--to-stage", "select"])
    assert res.exit_code == 0, res.output
    assert "select: finished" in res.output and load_selection(out) is not None
