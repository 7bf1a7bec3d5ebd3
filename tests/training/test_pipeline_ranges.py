"""Issue 32's pipeline switches: named holdout ranges fixed in advance (choose on validation, report on
test once per run, check once more), training across several tasks with an RFT curriculum, and the
evidence's per-task table (return beside deal rate and surplus)."""

from __future__ import annotations

import json
import random
import shlex
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpu_arena.cli import app
from gpu_arena.evaluation.ranges import RANGE_SIZE, RANGES, all_bounds, get_range
from gpu_arena.training.curriculum import open_tasks, world_tasks
from gpu_arena.training.evidence import markdown_report, per_task
from gpu_arena.training.pipeline import PipelineRun, run_pipeline
from gpu_arena.training.pipeline_compare import compare_pipelines
from gpu_arena.training.presets import PresetError

THREE = ("single_trade", "market_round", "coalition_market")


# ---------------------------------------------------------------------- ranges


def test_the_holdout_ranges_are_fixed_and_disjoint() -> None:
    # fixed in advance: moving a bound after its numbers were seen would re-cut the test
    assert all_bounds() == {"validation": [0, 9_999], "test": [10_000, 19_999], "check": [20_000, 29_999]}
    spans = sorted((r.start, r.last) for r in RANGES.values())
    assert all(a_last < b_start for (_, a_last), (b_start, _) in pairwise(spans))
    # the historical seeds 0-199 are the validation range's first 200: every earlier run was judged there
    assert get_range("validation").seeds(200) == list(range(200))
    assert get_range("test").seeds(3) == [10_000, 10_001, 10_002]
    assert [r.name for r in RANGES.values() if r.once] == ["test", "check"]
    with pytest.raises(ValueError, match="holds 10,000 seeds"):
        get_range("test").seeds(RANGE_SIZE + 1)  # would spill into the check range
    with pytest.raises(ValueError, match="unknown holdout range"):
        get_range("future")


# ---------------------------------------------------------------------- curriculum


def test_ordered_curriculum_opens_the_tasks_in_order_and_keeps_them() -> None:
    opened = [len(open_tasks(THREE, "ordered", i, 12)) for i in range(12)]
    assert opened == [1] * 4 + [2] * 4 + [3] * 4  # equal shares, cumulative
    assert open_tasks(THREE, "ordered", 5, 12) == ("single_trade", "market_round")
    # fewer iterations than tasks: the first stages are skipped, never the last
    assert [open_tasks(THREE, "ordered", i, 2) for i in range(2)] == [THREE[:2], THREE]
    assert open_tasks(THREE, "ordered", 0, 1) == THREE
    assert all(open_tasks(THREE, "mixed", i, 12) == THREE for i in range(12))
    rng = random.Random(0)
    assert set(world_tasks(THREE, "ordered", 0, 12, 20, rng)) == {"single_trade"}
    assert set(world_tasks(THREE, "ordered", 4, 12, 50, rng)) == {"single_trade", "market_round"}
    with pytest.raises(ValueError, match="unknown curriculum"):
        open_tasks(THREE, "shuffled", 0, 3)


def test_mixed_curriculum_draws_what_expert_iteration_drew_before() -> None:
    tasks = ("single_trade", "market_round")
    a, b = random.Random(7), random.Random(7)
    before = [[a.choice(tasks) for _ in range(6)] for _ in range(3)]  # rft.py's draw before curricula
    assert [world_tasks(tasks, "mixed", i, 3, 6, b) for i in range(3)] == before
    # one task consumes no randomness, as before
    c = random.Random(3)
    assert world_tasks(("single_trade",), "ordered", 0, 3, 4, c) == ["single_trade"] * 4
    assert c.random() == random.Random(3).random()


# ---------------------------------------------------------------------- options


def test_command_line_round_trips_the_new_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpu_arena.training.pipeline as pipeline

    run = PipelineRun(output=str(tmp_path / "out"), preset="tiny", tasks=THREE, curriculum="ordered",
                      eval_range="test", reopen=True, eval_tasks=("coalition_market",), teacher="rule_expert_short",
                      preference="dpo", dpo_beta=0.2, dpo_lr_scale=0.5, rl_proposals="without:buy,wait",
                      rl_train_on="both", rl_cumulative_corrections=True, rl_corrections_lr_scale=0.25,
                      rl_keep_optimizer=True, rl_save_every=4)
    cmd = run.command_line()
    assert "--preference dpo --dpo-beta 0.2 --dpo-lr-scale 0.5" in cmd
    assert "--rl-proposals without:buy,wait --rl-train-on both" in cmd
    assert "--rl-cumulative-corrections" in cmd and "--rl-corrections-lr-scale 0.25" in cmd
    assert "--rl-keep-optimizer --rl-save-every 4" in cmd
    assert "--tasks single_trade,market_round,coalition_market" in cmd and "--curriculum ordered" in cmd
    assert "--teacher rule_expert_short" in cmd
    assert "--eval-range test" in cmd and cmd.endswith("--reopen")
    seen: list[PipelineRun] = []

    def capture(r: PipelineRun, display: Any = None) -> dict[str, Any]:
        seen.append(r)
        return {"stages": {}}

    monkeypatch.setattr(pipeline, "run_pipeline", capture)
    res = CliRunner().invoke(app, shlex.split(cmd)[1:])
    assert res.exit_code == 0, res.output
    assert seen == [run]
    # the defaults write nothing: the one-task validation run's command is as it was
    plain = PipelineRun(output="o", preset="tiny").command_line()
    assert plain == "gpu-arena train pipeline --preset tiny --output o"
    # --task is the one-task spelling of --tasks
    res = CliRunner().invoke(app, ["train", "pipeline", "--preset", "tiny", "--output", str(tmp_path / "o2"),
                                   "--task", "market_round"])
    assert res.exit_code == 0 and seen[-1].tasks == ("market_round",)


@pytest.mark.parametrize(("changes", "says"), [
    ({"curriculum": "ordered", "rl_method": "grpo"}, "needs --rl rft"),
    ({"curriculum": "sideways"}, "unknown curriculum"),
    ({"teacher": "rule_expart"}, "--teacher: unknown scripted policy"),
    ({"eval_range": "future"}, "unknown --eval-range"),
    ({"eval_seeds": RANGE_SIZE + 1}, "the ranges do not overlap"),
    ({"tasks": ("single_trade", "single_trade")}, "names a task twice"),
    ({"tasks": ()}, "names no task"),
    ({"rl_proposals": "without:dance"}, "--rl-proposals: unknown step 'dance'"),
    ({"rl_proposals": "wait,wait"}, "--rl-proposals: 'wait,wait' names a policy twice"),
    ({"rl_proposals": "wait", "rl_method": "grpo", "curriculum": "mixed"}, "candidates of RFT's lookahead"),
    ({"rl_train_on": "turns"}, "--rl-train-on is RFT's: one of episodes, corrections, both"),
    ({"rl_cumulative_corrections": True}, "--rl-cumulative-corrections .* needs --rl-train-on both"),
    ({"rl_keep_optimizer": True, "rl_method": "grpo"}, "--rl-keep-optimizer is RFT's"),
    ({"rl_save_every": 4, "rl_method": "grpo"}, "--rl-save-every is RFT's"),
    ({"rl_save_every": -1}, "--rl-save-every must be a whole number of iterations"),
    ({"rl_cumulative_corrections": True, "rl_train_on": "corrections"}, "needs --rl-train-on both"),
    ({"rl_corrections_lr_scale": 0.5}, "--rl-corrections-lr-scale sets .* needs --rl-train-on both or corrections"),
    ({"rl_corrections_lr_scale": float("inf"), "rl_train_on": "both"}, "finite number above 0"),
])
def test_pipeline_refuses_bad_switches(tmp_path: Path, changes: dict[str, Any], says: str) -> None:
    with pytest.raises(PresetError, match=says):
        run_pipeline(PipelineRun(output=str(tmp_path / "x"), preset="tiny", **changes))
    assert not (tmp_path / "x").exists()


def test_the_teacher_replaces_the_presets_own_wherever_it_appears() -> None:
    from gpu_arena.training.pipeline import rft_teachers

    assert rft_teachers(PipelineRun(output="o", preset="small")) == ("rule_expert", "rule_expert")
    assert rft_teachers(PipelineRun(output="o", preset="small", teacher="rule_expert_short")) == (
        "rule_expert_short", "rule_expert_short")
    # tiny's lookahead proposes random_valid's moves (exploration, not its teacher): the preset's stays
    assert rft_teachers(PipelineRun(output="o", preset="tiny", teacher="rule_expert_short")) == (
        "rule_expert_short", None)
    assert PipelineRun(output="o", teacher=None).resolved().teacher == "rule_expert"
    # more proposal policies come after the first one, the teacher named once
    assert rft_teachers(PipelineRun(output="o", preset="small", teacher="rule_expert_short",
                                    rl_proposals="without:buy,rule_expert_short,wait")) == (
        "rule_expert_short", "rule_expert_short,without:buy,wait")
    assert rft_teachers(PipelineRun(output="o", preset="tiny", rl_proposals="wait")) == (
        "rule_expert", "random_valid,wait")


def test_the_rl_stage_hands_the_preference_pass_to_rft(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib

    import gpu_arena.training.pipeline as pipeline
    import gpu_arena.training.rft as rft

    seen: list[Any] = []

    def capture(r: Any, progress: Any = None) -> dict[str, Any]:
        seen.append(r)
        return {"run_id": "x", "steps": 1}

    monkeypatch.setattr(rft, "run_rft", capture)
    run = PipelineRun(output=str(tmp_path), preset="small", preference="dpo", dpo_beta=0.2, rl_iterations=1).resolved()
    pipeline._stage_rl(run, pipeline.Paths(tmp_path), lambda *a: contextlib.nullcontext(None))
    assert (seen[0].preference, seen[0].dpo_beta, seen[0].dpo_lr_scale) == ("dpo", 0.2, None)
    assert seen[0].train_on is None
    run = PipelineRun(output=str(tmp_path), preset="small", rl_train_on="both", rl_proposals="wait",
                      rl_iterations=1).resolved()
    pipeline._stage_rl(run, pipeline.Paths(tmp_path), lambda *a: contextlib.nullcontext(None))
    assert (seen[1].train_on, seen[1].proposal) == ("both", "rule_expert,wait")
    assert seen[1].cumulative_corrections is None
    run = PipelineRun(output=str(tmp_path), preset="small", rl_train_on="both", rl_cumulative_corrections=True,
                      rl_corrections_lr_scale=0.25, rl_iterations=1).resolved()
    pipeline._stage_rl(run, pipeline.Paths(tmp_path), lambda *a: contextlib.nullcontext(None))
    assert (seen[2].train_on, seen[2].cumulative_corrections, seen[2].corrections_lr_scale) == ("both", True, 0.25)
    assert seen[2].keep_optimizer is None
    run = PipelineRun(output=str(tmp_path), preset="small", rl_keep_optimizer=True, rl_iterations=1).resolved()
    pipeline._stage_rl(run, pipeline.Paths(tmp_path), lambda *a: contextlib.nullcontext(None))
    assert seen[3].keep_optimizer is True and seen[3].save_every is None
    run = PipelineRun(output=str(tmp_path), preset="small", rl_save_every=4, rl_iterations=1).resolved()
    pipeline._stage_rl(run, pipeline.Paths(tmp_path), lambda *a: contextlib.nullcontext(None))
    assert seen[4].save_every == 4


def test_eval_on_every_task_trained_on_and_the_extra_ones() -> None:
    run = PipelineRun(output="o", preset="small", tasks=("coalition_market", "market_round")).resolved()
    assert run.eval_tasks == ("coalition_market", "market_round")  # the preset's extra task once, not twice
    assert PipelineRun(output="o", preset="small").resolved().eval_tasks == ("single_trade", "market_round")


# ---------------------------------------------------------------------- the evidence's per-task table


def _row(role: str, task: str, mean: float, deal: float, surplus: float) -> dict[str, Any]:
    return {"role": role, "policy": role, "task": task, "split": "holdout", "n": 200, "mean": mean,
            "ci_low": mean - 0.01, "ci_high": mean + 0.01, "deal_rate": deal, "surplus_over_batna": surplus,
            "welfare_ratio": 0.9, "invalid_rate": 0.0}


def test_per_task_table_puts_deal_rate_and_surplus_beside_the_return() -> None:
    rows = [_row("trained", "single_trade", 0.1, 0.5, 6.0), _row("sft", "single_trade", 0.05, 0.7, 2.0),
            _row("trained", "market_round", -0.02, 0.2, -1.0)]
    table = per_task(rows)
    assert list(table) == ["single_trade", "market_round"]
    assert table["single_trade"]["sft"] == pytest.approx({"n": 200, "mean_return": 0.05, "ci_low": 0.04, "ci_high": 0.06,
                                                          "deal_rate": 0.7, "surplus_over_batna": 2.0,
                                                          "welfare_ratio": 0.9, "invalid_rate": 0.0})
    old = {"command": "gpu-arena train pipeline", "commit": "abc", "seeds": {"holdout": [0, 199]}, "wall_s": {"eval": 1.0},
           "comparisons": [], "results": rows}
    md = markdown_report(old)
    assert "holdout seeds 0–199, the validation range" in md.splitlines()[0]  # a file from before the ranges
    assert "**single_trade**" in md and "**market_round**" in md
    assert "| sft | 200 | +0.0500 | [+0.0400, +0.0600] | 0.700 | - | +2.00 | 0.900 | - |" in md  # no gain share: "-"
    shared = {**old, "results": [{**rows[0], "gain_share": 0.25}]}
    assert "| trained | 200 | +0.1000 | [+0.0900, +0.1100] | 0.500 | 0.250 | +6.00 | 0.900 | - |" in markdown_report(shared)
    reopened = {**old, "seeds": {"holdout": [10_000, 10_199], "range": "test", "reopened": True}}
    assert "the test range; a second look" in markdown_report(reopened)


# ---------------------------------------------------------------------- a tiny run across two tasks


def test_tiny_pipeline_across_tasks_reports_on_the_test_range_once(tmp_path: Path) -> None:
    out, db = tmp_path / "run", str(tmp_path / "arena.db")
    tasks = ("single_trade", "market_round")
    run = PipelineRun(output=str(out), preset="tiny", db=db, workers=1, tasks=tasks, curriculum="ordered",
                      eval_range="test", rl_iterations=2, teacher="rule_expert_short")
    run_pipeline(run)
    # every task in the data, the RL worlds and the evaluation; the teacher's episodes in both
    provenance = json.loads((out / "data" / "provenance.json").read_text())
    assert provenance["tasks"] == list(tasks) and provenance["policy"] == "rule_expert_short"
    rl = json.loads((out / "rl" / "run_config.json").read_text())["config"]["run"]
    assert tuple(rl["tasks"]) == tasks and rl["curriculum"] == "ordered"
    assert rl["teacher"] == "rule_expert_short" and rl["proposal"] == "random_valid"  # tiny's exploration kept
    metrics = [json.loads(line) for line in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert all(0 <= m["arena/repeated_moves_kept"] <= m["arena/repeated_moves"] for m in metrics)
    evidence = json.loads((out / "evidence.json").read_text())
    assert evidence["tasks"] == list(tasks) and evidence["task"] == "single_trade"
    assert {c["task"] for c in evidence["comparisons"]} == set(tasks) == set(evidence["per_task"])
    for roles in evidence["per_task"].values():
        assert {"trained", "sft", "no_negotiation", "rule_expert"} <= set(roles)
        assert all({"mean_return", "deal_rate", "surplus_over_batna"} <= set(r) for r in roles.values())
    # the seeds looked at, the range they came from and every range
    seeds = evidence["seeds"]
    assert seeds["holdout"] == [10_000, 10_002] and seeds["range"] == "test" and seeds["ranges"] == all_bounds()
    assert seeds["reopened"] is False and "--eval-range test" in evidence["command"]
    state = json.loads((out / "pipeline.json").read_text())
    assert [(x["range"], x["seeds"]) for x in state["looks"]] == [("test", [10_000, 10_002])]

    # a second look at the test range is refused before anything runs or is recorded
    again = PipelineRun(output=str(out), preset="tiny", db=db, workers=1, tasks=tasks, eval_range="test",
                        from_stage="eval", eval_tasks=("single_trade",), baselines=("no_negotiation", "rule_expert"))
    with pytest.raises(PresetError, match="evaluated on the test range already"):
        run_pipeline(again)
    assert json.loads((out / "pipeline.json").read_text())["looks"] == state["looks"]
    # the validation range may be looked at at will; a reopened test range says so in its evidence
    run_pipeline(PipelineRun(**{**again.__dict__, "eval_range": "validation"}))
    assert json.loads((out / "evidence.json").read_text())["seeds"]["holdout"] == [0, 2]
    # the latest look is evidence.json; each range's own file keeps its evidence after a look at another
    assert json.loads((out / "evidence-test.json").read_text())["seeds"]["holdout"] == [10_000, 10_002]
    assert json.loads((out / "evidence-validation.json").read_text())["seeds"]["range"] == "validation"
    run_pipeline(PipelineRun(**{**again.__dict__, "reopen": True}))
    evidence = json.loads((out / "evidence.json").read_text())
    assert evidence["seeds"]["reopened"] is True and len(evidence["seeds"]["earlier_looks"]) == 1
    looks = json.loads((out / "pipeline.json").read_text())["looks"]
    assert [x["range"] for x in looks] == ["test", "validation", "test"]
    res = CliRunner().invoke(app, ["train", "evidence", str(out), "--markdown"])
    assert res.exit_code == 0 and "a second look at this range on this run (reopened)" in res.output
    # two runs evaluated on different ranges share no holdout world: compared, they are refused, not empty
    import shutil

    other = tmp_path / "other"
    shutil.copytree(out, other)
    # a pretrained start (--model; smollm2's GGUF) is evaluated as it was before training: its zero-shot
    # row, the same prompt and grammar as the trained model (here the SFT checkpoint stands in for it)
    run_pipeline(PipelineRun(**{**again.__dict__, "output": str(other), "eval_range": "validation",
                                "model": str(out / "sft")}))
    evidence = json.loads((other / "evidence.json").read_text())
    assert evidence["policies"]["zero_shot"] == evidence["policies"]["sft"].replace("/other/", "/run/")
    diffs = {c["comparison"]: c["mean_diff"] for c in evidence["comparisons"]}
    assert diffs["trained-vs-zero_shot"] == pytest.approx(diffs["trained-vs-sft"])
    assert "zero_shot" in evidence["per_task"]["single_trade"]
    with pytest.raises(PresetError, match="share no holdout world"):
        compare_pipelines(out, other)
    assert compare_pipelines(other, other)[0]["n"] == 3
