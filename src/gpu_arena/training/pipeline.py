"""``gpu-arena train pipeline``: SFT data → SFT → RL against the live environment → holdout evaluation
→ ``evidence.json``, one command, every stage recorded.

Stages (:data:`STAGES`) and what each leaves in the output directory:

- ``data``: ``data/`` — the teacher's episodes as chats (:mod:`gpu_arena.training.data`);
- ``sft``: ``sft/`` — the SFT checkpoint (the *start* the evidence compares against);
- ``rl``: ``rl/`` — the trained checkpoint: expert iteration (:mod:`.rft`, the default) or GRPO (:mod:`.grpo`);
- ``select``: ``select.json`` — with ``--rl-select K``, which of the RL stage's saved checkpoints the
  evaluation measures as the trained model, chosen on the validation range's last ``K`` seeds
  (:mod:`.selection`); skipped otherwise (the final ``rl/`` is the trained model);
- ``eval``: ``eval.json``, ``eval-replays.jsonl`` and ``evidence.json`` — the trained model, the SFT
  start and the baselines on holdout worlds of every task trained on (and the preset's extra tasks),
  seat ``lab_0``, greedy decoding, through the same evaluation runner as ``gpu-arena eval`` (its rows
  are stored as an evaluation run), the paired differences by seed (:data:`COMPARISONS`) and, per
  task and role, the return beside the deal rate and the surplus over BATNA.

The evaluation plays the first ``eval_seeds`` seeds of one named holdout range
(:mod:`gpu_arena.evaluation.ranges`): ``validation`` for the runs on the way, ``test`` for the
documented evidence, ``check`` for a last look. ``pipeline.json`` records every range a run's output
was evaluated on; the test and check ranges are looked at once per run (a second evaluation there
is refused unless ``reopen``, and its evidence then says so). ``evidence-RANGE.json`` keeps each
range's latest evidence when ``evidence.json`` moves on to another.

``pipeline.json`` keeps each stage's status, wall time and store run id, so ``--from-stage rl``
re-runs RL and evaluation on the SFT checkpoint already there instead of redoing SFT. A stage's
output is replaced when it runs again; the record of looks is kept, whatever stage a run restarts
from: a retrained model in the same directory is the same run choosing again.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..evaluation.ranges import all_bounds, get_range
from ..policies import scripted_policies
from .common import logged_run
from .evidence import per_task
from .pipeline_run import RL_METHODS, STAGES, PipelineRun
from .presets import PresetError, get_preset
from .runlog import RunLog

__all__ = ["COMPARISONS", "RL_METHODS", "STAGES", "Paths", "PipelineRun", "run_pipeline"]

STATE_NAME = "pipeline.json"
EVIDENCE_NAME = "evidence.json"
# (name, the policy whose return is first, the one subtracted): every comparison is paired by seed
COMPARISONS = (
    ("trained-vs-no_negotiation", "trained", "no_negotiation"),
    ("trained-vs-sft", "trained", "sft"),
    ("sft-vs-no_negotiation", "sft", "no_negotiation"),
    ("trained-vs-rule_expert", "trained", "rule_expert"),
    # a pretrained start (smollm2, or --model): what the pipeline added to what the model already knew
    ("trained-vs-zero_shot", "trained", "zero_shot"),
)


@dataclass
class Paths:
    root: Path
    data: Path = field(init=False)
    sft: Path = field(init=False)
    rl: Path = field(init=False)

    def __post_init__(self) -> None:
        self.data, self.sft, self.rl = self.root / "data", self.root / "sft", self.root / "rl"

    @property
    def base(self) -> Path:
        """The pretrained start written as a checkpoint, for its zero-shot row (smollm2's GGUF)."""
        return self.root / "base"

    @property
    def state(self) -> Path:
        return self.root / STATE_NAME

    @property
    def evidence(self) -> Path:
        return self.root / EVIDENCE_NAME


def llm_policy(checkpoint: Path, constrained: bool = False, mode: str = "tools") -> str:
    """How the evaluation names a checkpoint: its prompt mode (the preset's: tools, or compact for
    pretrained tokenizers), greedy, one answer capped at 64 tokens (under the grammar: its longest
    reply), decoded under the seat's action grammar when ``constrained``."""
    return f"llm:hf:{checkpoint}?mode={mode}&max_tokens=64" + ("&constrained=1" if constrained else "")


def load_state(paths: Paths) -> dict[str, Any]:
    """A pipeline's ``pipeline.json`` (no stages yet if it is missing or unreadable)."""
    if paths.state.exists():
        try:
            return dict(json.loads(paths.state.read_text()))
        except ValueError:
            pass
    return {"stages": {}}


def _needs(stage: str, paths: Paths) -> None:
    """What a stage reads from earlier ones must be there (``--from-stage`` skips those)."""
    required = {"sft": [paths.data / "provenance.json"], "rl": [paths.sft / "config.json"],
                "select": [paths.sft / "config.json", paths.rl / "config.json"],
                "eval": [paths.sft / "config.json", paths.rl / "config.json"]}[stage] if stage != "data" else []
    for p in required:
        if not p.exists():
            raise PresetError(f"stage {stage} needs {p}; run the earlier stages first (--from-stage)")


def run_pipeline(run: PipelineRun, *, display: Callable[[str, int], Any] | None = None) -> dict[str, Any]:
    """Run the stages from ``run.from_stage`` to ``run.to_stage``; return the final state (and the
    evidence when the eval stage ran). ``display(stage, total)`` returns a progress context with
    ``update(completed, metrics)`` (:class:`~gpu_arena.training.progress.StageProgress`)."""
    from .progress import StageProgress

    command = run.command_line()  # as given: defaults resolved later are the preset's
    run = run.resolved()
    run.validate()
    paths = Paths(Path(run.output))
    paths.root.mkdir(parents=True, exist_ok=True)
    state = load_state(paths)
    state["config"] = asdict(run)
    # the evidence names the command that ran the first stage; resumptions are listed after it
    if run.from_stage == STAGES[0] or "command" not in state:
        state["command"], state["resumed"] = command, []
    else:
        state.setdefault("resumed", []).append(command)
    show = display or (lambda stage, total: StageProgress(stage, total, enabled=False))
    first, last = STAGES.index(run.from_stage), STAGES.index(run.to_stage)
    # the pipeline is a training run of its own (kind "pipeline"): one metrics row per finished stage,
    # the evidence as its summary, so the dashboard and `gpu-arena runs` find it in the store
    _needs(run.from_stage, paths)  # before anything is recorded: a refused resume leaves no trace
    if last == STAGES.index("eval"):
        check_look(run, state)
    runlog = RunLog(kind="pipeline", config={"run": asdict(run), "command": state["command"]},
                    output_dir=paths.root / "log", preset=run.preset, model=run.model, db=run.db)

    def body() -> dict[str, Any]:
        for stage in STAGES[first:last + 1]:
            _needs(stage, paths)
            state["stages"][stage] = {"status": "running"}
            _save_state(paths, state)
            t0 = time.perf_counter()
            try:
                info = _STAGE_FUNCS[stage](run, paths, show)
            except BaseException as e:
                state["stages"][stage] = {"status": "failed", "error": f"{type(e).__name__}: {e}",
                                          "wall_s": time.perf_counter() - t0}
                _save_state(paths, state)
                raise
            if "look" in info:  # the range's numbers are out: the look is on the run's record from now on
                state.setdefault("looks", []).append(info.pop("look"))
            if info.pop("skipped", False):  # an optional stage not asked for leaves no row (and no stale one)
                del state["stages"][stage]
                _save_state(paths, state)
                continue
            state["stages"][stage] = {"status": "finished", "wall_s": time.perf_counter() - t0, **info}
            _save_state(paths, state)
            runlog.log(STAGES.index(stage) + 1, {"stage": stage, **{k: v for k, v in state["stages"][stage].items()
                                                                    if isinstance(v, int | float | str)}})
        if last == STAGES.index("eval"):
            state["evidence"] = str(paths.evidence)
            return {"evidence": json.loads(paths.evidence.read_text()), "stages": state["stages"]}
        return {"stages": state["stages"]}

    summary = logged_run(runlog, body)
    state["run_id"] = summary["run_id"]
    _save_state(paths, state)
    return state


def _save_state(paths: Paths, state: dict[str, Any]) -> None:
    paths.state.write_text(json.dumps(state, indent=2, default=str))


def check_look(run: PipelineRun, state: dict[str, Any]) -> None:
    """Refuse a second evaluation of this run's output on a range looked at once per run (test,
    check), unless ``run.reopen``: choosing again after seeing the test numbers is how a method fits
    the test."""
    r = get_range(run.eval_range)
    earlier = [x for x in state.get("looks", []) if x.get("range") == r.name]
    if r.once and earlier and not run.reopen:
        raise PresetError(f"{run.output} was evaluated on the {r.name} range already (at {earlier[0].get('at')}); "
                          f"it is looked at once per run: choose on --eval-range validation, or pass --reopen to "
                          f"look again (the evidence then records the second look)")


# ---------------------------------------------------------------------- stages

def rft_teachers(run: PipelineRun) -> tuple[str, str | None]:
    """The RFT stage's replayed teacher and lookahead proposal policies: the run's teacher where the
    preset uses its own (another proposal, ``random_valid``'s exploration, is the preset's: None),
    then ``--rl-proposals`` after it."""
    preset = get_preset(run.preset)
    teacher = str(run.resolved().teacher)
    proposal = teacher if preset.rft.proposal == preset.pipeline.teacher else None
    if run.rl_proposals:  # more candidates, after the first policy's, which keeps its seeds and wins ties first
        first = proposal or preset.rft.proposal
        extra = [p for p in scripted_policies(run.rl_proposals) if p != first]
        proposal = ",".join([*([first] if first else []), *extra])
    return teacher, proposal


def _stage_data(run: PipelineRun, paths: Paths, show: Callable[[str, int], Any]) -> dict[str, Any]:
    from .data import SFTDataSpec, build_sft_records, save_sft_data

    teacher = str(run.teacher)  # resolved: the preset's unless --teacher
    spec = SFTDataSpec(policy=teacher, tasks=run.tasks, split="train", seeds=tuple(range(int(run.data_seeds or 1))),
                       mode=get_preset(run.preset).prompt_mode)
    with show("data", len(spec.tasks) * len(spec.seeds)) as bar:
        done = [0]

        def tick(n: int) -> None:
            done[0] += n
            bar.update(done[0])

        records, provenance = build_sft_records(spec, progress=tick)
    save_sft_data(records, provenance, paths.data)
    return {"episodes": provenance["episodes_kept"], "mean_return": provenance["mean_return_kept"],
            "teacher": teacher}


def _stage_sft(run: PipelineRun, paths: Paths, show: Callable[[str, int], Any]) -> dict[str, Any]:
    from .sft import SFTRun, run_sft

    steps = int(run.sft_steps or 1)
    with show("sft", steps) as bar:
        result = run_sft(SFTRun(data=str(paths.data), output_dir=str(paths.sft), preset=run.preset, model=run.model,
                                max_steps=steps, seed=run.seed, db=run.db, overwrite=True, lora=run.lora,
                                accel=run.accel), display=bar)
    return {"run_id": result["run_id"], "steps": result["steps"], "train_loss": result["train_loss"],
            "tokens_per_s": (result.get("final") or {}).get("train_tokens_per_s")}


def _stage_rl(run: PipelineRun, paths: Paths, show: Callable[[str, int], Any]) -> dict[str, Any]:
    from .selection import SELECT_NAME

    iterations = int(run.rl_iterations or 1)
    (paths.root / SELECT_NAME).unlink(missing_ok=True)  # a choice among the checkpoints this stage replaces
    if run.rl_method == "grpo":
        from .grpo import GRPORun, run_grpo

        with show("rl (grpo)", iterations) as bar:
            result = run_grpo(GRPORun(output_dir=str(paths.rl), model=str(paths.sft), preset=run.preset,
                                      tasks=run.tasks, max_steps=iterations, seed=run.seed, db=run.db,
                                      overwrite=True, lora=run.lora, accel=run.accel, constrained=run.constrained,
                                      workers=run.workers, backend=run.backend), display=bar)
    else:
        from .rft import RFTRun, run_rft

        teacher, proposal = rft_teachers(run)
        with show("rl (rft)", iterations) as bar:
            result = run_rft(RFTRun(output_dir=str(paths.rl), model=str(paths.sft), preset=run.preset,
                                    tasks=run.tasks, curriculum=run.curriculum, iterations=iterations,
                                    worlds_per_iteration=run.rl_worlds, replay=run.rl_replay, teacher=teacher,
                                    proposal=proposal, train_on=run.rl_train_on,
                                    cumulative_corrections=run.rl_cumulative_corrections or None,
                                    corrections_lr_scale=run.rl_corrections_lr_scale,
                                    keep_optimizer=run.rl_keep_optimizer or None,
                                    save_every=run.rl_save_every,
                                    preference=run.preference, dpo_beta=run.dpo_beta,
                                    dpo_lr_scale=run.dpo_lr_scale,
                                    constrained=run.constrained, seed=run.seed, db=run.db, overwrite=True,
                                    accel=run.accel, workers=run.workers, backend=run.backend),
                             progress=lambda m: bar.update(int(m["iteration"]), m))
    final = result.get("final") or {}
    return {"run_id": result["run_id"], "method": run.rl_method, "steps": result.get("steps"),
            "episodes_per_min": result.get("episodes_per_min", final.get("arena/episodes_per_min"))}


def _stage_select(run: PipelineRun, paths: Paths, show: Callable[[str, int], Any]) -> dict[str, Any]:
    from .evaluate import evaluate_checkpoint
    from .selection import SELECT_NAME, candidates, select_checkpoint

    if not run.rl_select:  # the final rl/ is the trained model; an earlier run's choice is not kept
        (paths.root / SELECT_NAME).unlink(missing_ok=True)
        return {"skipped": True}
    from ..evaluation.store import connect, load_optima, save_optima

    constrained = bool(run.constrained)
    mode = get_preset(run.preset).prompt_mode
    tasks = list(run.eval_tasks or run.tasks)
    n, iterations = int(run.rl_select), int(run.rl_iterations or 1)
    con = connect(run.db)
    optima = load_optima(con)
    with show("select", (len(candidates(paths.rl, iterations)) + 1) * len(tasks) * n) as bar:
        done = [0]

        def tick(k: int) -> None:
            done[0] += k
            bar.update(done[0])

        def play(path: Path, name: str, seeds: list[int]) -> dict[tuple[str, int], float]:
            rows = evaluate_checkpoint(path, llm_policy(path, constrained, mode), tasks, "holdout", seeds,
                                       optima=optima, constrained=constrained, prompt_mode=mode, progress=tick)
            return {(r.task, r.seed): r.episode_return for r in rows}

        record = select_checkpoint(paths.root, paths.sft, paths.rl, iterations, tasks, n, play)
    save_optima(con, optima)
    return {"chosen": record["chosen"], "chosen_iteration": record["chosen_iteration"], "seeds": record["seeds"],
            "select": str(paths.root / SELECT_NAME)}


def _stage_eval(run: PipelineRun, paths: Paths, show: Callable[[str, int], Any]) -> dict[str, Any]:
    from ..evaluation import aggregate, run_evaluation
    from ..evaluation.replay import write_jsonl
    from ..evaluation.store import connect, git_commit, load_optima, save_optima, save_run
    from .evaluate import evaluate_checkpoint, turn_stats
    from .selection import load_selection

    constrained = bool(run.constrained)
    mode = get_preset(run.preset).prompt_mode
    # the select stage's choice among the RL stage's checkpoints when it ran, else the final one
    selection = load_selection(paths.root)
    checkpoints = {"trained": paths.root / selection["chosen"] if selection else paths.rl, "sft": paths.sft}
    base = zero_shot_checkpoint(run, paths)
    if base is not None:
        checkpoints["zero_shot"] = base
    roles = {**{role: llm_policy(path, constrained, mode) for role, path in checkpoints.items()},
             **{b: b for b in run.baselines}}
    policies = list(dict.fromkeys(roles.values()))
    tasks = list(run.eval_tasks or run.tasks)
    holdout = get_range(run.eval_range)
    seeds = holdout.seeds(int(run.eval_seeds or 1))
    con = connect(run.db)
    optima = load_optima(con)
    t0 = time.perf_counter()
    with show("eval", len(policies) * len(tasks) * len(seeds)) as bar:
        done = [0]

        def tick(n: int) -> None:
            done[0] += n
            bar.update(done[0])

        # the scripted baselines on the process pool; each checkpoint batched (one generate per round for
        # all its episodes: the same rows as `gpu-arena eval` gives llm:hf, in a fraction of the time)
        scripted = [p for p in policies if not p.startswith("llm:")]
        results = run_evaluation(scripted, tasks, "holdout", seeds, workers=run.workers, keep_replays=True,
                                 optima=optima, progress=tick, backend=run.backend) if scripted else []
        for role, path in checkpoints.items():
            results += evaluate_checkpoint(path, roles[role], tasks, "holdout", seeds, optima=optima,
                                           constrained=constrained, prompt_mode=mode, keep_replays=True,
                                           progress=tick)
        order = {p: i for i, p in enumerate(policies)}
        results.sort(key=lambda r: (tasks.index(r.task), order[r.policy], r.seed))
    duration = time.perf_counter() - t0
    rows = aggregate(results)
    save_optima(con, optima)
    args = {"policies": policies, "tasks": tasks, "split": "holdout", "seeds": len(seeds), "seed_start": seeds[0],
            "range": holdout.name, "workers": run.workers, "pipeline": str(paths.root)}
    eval_run = save_run(con, kind="eval", args=args, seeds=seeds, rows=rows, episodes=results, duration_s=duration)
    replays = paths.root / "eval-replays.jsonl"
    write_jsonl(replays, (r.replay for r in results if r.replay))
    turns = turn_stats(replays)
    (paths.root / "eval.json").write_text(json.dumps({"results": rows, "turns": turns, "args": args,
                                                       "duration_s": duration}, indent=2))
    comparisons = compare(results, roles)
    state = load_state(paths)
    wall = {s: float(v["wall_s"]) for s, v in state.get("stages", {}).items() if "wall_s" in v}
    wall["eval"] = time.perf_counter() - t0
    by_policy = {p: role for role, p in roles.items()}
    earlier = [x for x in state.get("looks", []) if x.get("range") == holdout.name]
    look = {"range": holdout.name, "seeds": [seeds[0], seeds[-1]], "tasks": tasks, "eval_run": eval_run,
            "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    results_rows = [{"role": by_policy.get(r["policy"], r["policy"]), **r} for r in rows]
    evidence = {
        "command": state.get("command") or run.command_line(),
        "commit": git_commit(), "preset": run.preset, "task": run.tasks[0], "tasks": list(run.tasks),
        "eval_tasks": tasks, "rl_method": run.rl_method, "curriculum": run.curriculum,
        # which holdout seeds were looked at, out of which fixed ranges, and whether this range had been
        # looked at before on this run (a reopened test range is not a first look)
        "seeds": {"holdout": [seeds[0], seeds[-1]], "range": holdout.name, "ranges": all_bounds(),
                  "reopened": bool(earlier), "earlier_looks": earlier,
                  "sft_data_train": [0, int(run.data_seeds or 1) - 1], "seed": run.seed},
        "resumed": state.get("resumed", []), "wall_s": wall, "policies": roles, "eval_run_id": eval_run,
        "runs": {**{s: v.get("run_id") for s, v in state.get("stages", {}).items() if v.get("run_id") is not None},
                 "eval": eval_run},
        "selection": selection,
        "comparisons": comparisons,
        "per_task": per_task(results_rows),
        "valid_turns": [{"role": by_policy.get(t["policy"], t["policy"]), **t} for t in turns],
        "results": results_rows,
    }
    for target in (paths.evidence, paths.root / f"evidence-{holdout.name}.json"):  # a later look keeps this one's
        target.write_text(json.dumps(evidence, indent=2))
    return {"run_id": eval_run, "episodes": len(results), "evidence": str(paths.evidence), "range": holdout.name,
            "look": look}


def zero_shot_checkpoint(run: PipelineRun, paths: Paths) -> Path | None:
    """The checkpoint of a pretrained start, evaluated as it was before any training (its zero-shot
    row, under the same prompt mode and grammar as the trained model): ``--model`` when given, the
    preset's GGUF written once to ``base/`` for smollm2; None for a model initialised at random
    (nothing to compare: its zero-shot play is noise)."""
    if run.model is not None:
        return Path(run.model) if Path(run.model).is_dir() else _write_base(Path(run.model), paths)
    if get_preset(run.preset).model is None:
        from .presets import smollm2_gguf

        return _write_base(smollm2_gguf(), paths)
    return None


def _write_base(source: Path, paths: Paths) -> Path:
    from .presets import load_pretrained, save_checkpoint

    if not (paths.base / "config.json").exists():
        # the tool-calling template the SFT start gets too: the zero-shot row reads the same prompt
        model, tokenizer = load_pretrained(source, tools_template=True)
        save_checkpoint(model, tokenizer, paths.base, meta={"kind": "base", "source": str(source.name)})
    return paths.base


def compare(results: Sequence[Any], roles: dict[str, str]) -> list[dict[str, Any]]:
    """The evidence's paired comparisons (:data:`COMPARISONS`) on every task and split evaluated."""
    from ..evaluation import paired_differences

    returns = [(r.policy, r.task, r.split, r.seed, r.episode_return) for r in results]
    out = []
    for name, first, second in COMPARISONS:
        if first not in roles or second not in roles:
            continue
        for row in paired_differences(returns, roles[first]):
            if row["versus"] != roles[second]:
                continue
            out.append({"task": row["task"], "split": row["split"], "comparison": name, "n": row["n"],
                        "mean_diff": row["mean_diff"], "ci_low": row["ci_low"], "ci_high": row["ci_high"],
                        "wins": row["wins"], "losses": row["losses"]})
    return out


_STAGE_FUNCS: dict[str, Callable[[PipelineRun, Paths, Callable[[str, int], Any]], dict[str, Any]]] = {
    "data": _stage_data, "sft": _stage_sft, "rl": _stage_rl, "select": _stage_select, "eval": _stage_eval,
}

__all__ = ["COMPARISONS", "EVIDENCE_NAME", "RL_METHODS", "STAGES", "Paths", "PipelineRun", "check_look", "compare",
           "llm_policy", "load_state", "run_pipeline", "zero_shot_checkpoint"]
