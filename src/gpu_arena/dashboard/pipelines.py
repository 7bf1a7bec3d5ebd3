"""Pipeline runs of ``gpu-arena train pipeline`` for the dashboard, read from the store only:
``GET /api/training/pipelines/latest``, ``GET /api/training/pipelines/{run_id}`` and
``GET /api/training/pipelines/{run_id}/compare?task=&seed=`` (Before vs after).

A pipeline is a training run of kind ``pipeline`` whose summary is ``{"evidence", "stages"}``: the
evidence names its stage runs (``runs``: the SFT and RL training runs, the evaluation run), the
evaluated policies by role (``policies``: ``trained``, ``sft``, the baselines) and the paired
comparisons by holdout seed (``comparisons``). Nothing here imports the training code: the rows the
pipeline stored are the whole story (a pipeline that stopped before its evaluation has no evidence;
its stage runs are then found from the metric row each finished stage logged).

*Before vs after* is one holdout world played by the SFT start and by the trained model: the two
episodes of the pipeline's evaluation run with their kept replays, each with its return and the
seat's action, result and reward in every round.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query

from ..server.environment import MAX_SEED, TaskName
from ..server.episodes import eval_ref
from ..server.errors import ArenaRequestError, responses
from ..training.runlog import list_training_runs, load_training_run

KIND = "pipeline"
# what the glance shows, in order: (comparison, label)
HEADLINE = (("trained-vs-sft", "trained − start (SFT)"), ("trained-vs-no_negotiation", "trained − no_negotiation"))
ROLES = (("sft", "start (SFT)"), ("trained", "trained"))
STAGE_RUNS = ("sft", "rl")  # stages whose run is a training run (the eval stage's is an evaluation run)

Reader = Callable[..., Any]  # read(fn, *args): fn(connection, *args) on the read-only store, None without one


class PipelineNotFound(ArenaRequestError):
    status = 404
    code = "pipeline_not_found"


class PipelineEpisodeNotFound(ArenaRequestError):
    status = 404
    code = "pipeline_episode_not_found"


def pipeline_command(db: str | None) -> str:
    """The command that stores a pipeline run this server can show (the same store)."""
    return "gpu-arena train pipeline --preset tiny --output runs/pipeline" + (f" --db {db}" if db else "")


def _dict(value: Any) -> dict[str, Any]:
    """A stored JSON object, or an empty one where the store holds something else (a running run's summary)."""
    return value if isinstance(value, dict) else {}


def evidence_of(run: dict[str, Any]) -> dict[str, Any] | None:
    return _dict(_dict(run.get("summary")).get("evidence")) or None


def stage_runs(run: dict[str, Any]) -> dict[str, int | None]:
    """The pipeline's stage runs: ``sft`` and ``rl`` (training runs), ``eval`` (the evaluation run).

    From the evidence when the pipeline finished its evaluation, else from its summary's stages or
    the metric row each finished stage logged (``load_training_run``'s ``metrics``)."""
    out: dict[str, int | None] = {"sft": None, "rl": None, "eval": None}
    stages = _dict(_dict(run.get("summary")).get("stages"))
    found = [(s, _dict(v).get("run_id")) for s, v in stages.items()]
    found += [(m.get("stage"), m.get("run_id")) for m in run.get("metrics") or []]
    found += list(_dict(_dict(evidence_of(run)).get("runs")).items())
    for stage, rid in found:
        if stage in out and isinstance(rid, int) and not isinstance(rid, bool):
            out[stage] = rid
    return out


def headline(run: dict[str, Any]) -> dict[str, Any] | None:
    """The glance's rows of a pipeline with evidence: trained − SFT and trained − no_negotiation on
    the training task (holdout), each with its 95% CI and n."""
    evidence = evidence_of(run)
    if evidence is None:
        return None
    task = evidence.get("task")
    comparisons = [c for c in evidence.get("comparisons") or [] if isinstance(c, dict)]
    rows = []
    for name, label in HEADLINE:
        row = next((c for c in comparisons if c.get("comparison") == name and c.get("task") == task
                    and c.get("split", "holdout") == "holdout"), None)
        if row is not None:
            rows.append({**row, "label": label})
    return {"run_id": run["id"], "created_at": run.get("created_at"), "status": run.get("status"),
            "task": task, "preset": evidence.get("preset"), "rl_method": evidence.get("rl_method"),
            "command": evidence.get("command"), "commit": evidence.get("commit"), "rows": rows}


def pipeline_view(run: dict[str, Any]) -> dict[str, Any]:
    """What the Training section and Before vs after read of one pipeline run."""
    summary = _dict(run.get("summary"))
    evidence = evidence_of(run)
    config = _dict(run.get("config"))
    return {
        "run": {k: run.get(k) for k in ("id", "kind", "status", "created_at", "finished_at", "git_commit", "preset",
                                        "duration_s")},
        "command": (evidence or {}).get("command") or config.get("command"),
        "stages": summary.get("stages") or {m["stage"]: m for m in run.get("metrics") or [] if "stage" in m},
        "stage_runs": stage_runs(run),
        "evidence": evidence,
        "headline": headline(run),
        "error": summary.get("error"),
    }


def latest_pipeline(con: sqlite3.Connection) -> dict[str, Any] | None:
    """The newest pipeline run with evidence (one that finished its evaluation), or None."""
    return next((r for r in list_training_runs(con, kind=KIND, limit=100) if evidence_of(r) is not None), None)


def load_pipeline(con: sqlite3.Connection, run_id: int) -> dict[str, Any] | None:
    run = load_training_run(con, run_id)
    return run if run is not None and run["kind"] == KIND else None


# ---------------------------------------------------------------------------------------------- Before vs after


def _episodes(con: sqlite3.Connection, eval_run: int, policies: dict[str, str]) -> list[tuple[Any, ...]]:
    """(rowid, role, task, seed, return, has replay) of the roles' holdout episodes in the evaluation run."""
    by_policy = {p: role for role, p in policies.items()}
    marks = ",".join("?" * len(by_policy))
    rows = con.execute(
        f"SELECT rowid, policy, task, seed, episode_return, replay IS NOT NULL FROM episodes WHERE run_id = ? "
        f"AND split = 'holdout' AND policy IN ({marks}) ORDER BY rowid", (eval_run, *by_policy)).fetchall()
    return [(r[0], by_policy[r[1]], r[2], int(r[3]), float(r[4]), bool(r[5])) for r in rows]


def _rounds(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The seat's side of every round of a replay: its action, result, reward and the return so far,
    with the other seats' actions (a damaged record yields what it holds, never an error)."""
    seat = str(record.get("seat") or "lab_0")
    out, total = [], 0.0
    for i, rnd in enumerate(record.get("transcript") or []):
        if not isinstance(rnd, dict):
            continue
        actions = _dict(rnd.get("actions"))
        result = _dict(rnd.get("results")).get(seat) or [None, None]
        reward = _dict(rnd.get("rewards")).get(seat)
        total += float(reward or 0.0)
        out.append({"round": rnd.get("round", i), "action": actions.get(seat), "ok": result[0], "code": result[1],
                    "reward": reward, "cumulative": total,
                    "others": {lid: a for lid, a in sorted(actions.items()) if lid != seat}})
    return out


def compare_episodes(con: sqlite3.Connection, run: dict[str, Any], task: str | None,
                     seed: int | None) -> dict[str, Any]:
    """The SFT start's and the trained model's episodes of one holdout world of a pipeline run
    (task: the training task unless given; seed: where the two returns differ most unless given)."""
    evidence = evidence_of(run)
    if evidence is None:
        raise PipelineNotFound(f"pipeline run {run['id']} has no evidence: it stopped before its evaluation stage",
                               code="pipeline_not_evaluated")
    eval_run = stage_runs(run)["eval"] or evidence.get("eval_run_id")
    named = _dict(evidence.get("policies"))
    policies = {role: str(named[role]) for role, _ in ROLES if isinstance(named.get(role), str)}
    if not isinstance(eval_run, int) or len(policies) < len(ROLES):
        raise PipelineEpisodeNotFound(f"pipeline run {run['id']}'s evidence names no evaluation of sft and trained")
    found = _episodes(con, eval_run, policies)
    if not found:
        raise PipelineEpisodeNotFound(f"evaluation run {eval_run} of pipeline run {run['id']} is not in the store")
    tasks = list(dict.fromkeys(f[2] for f in found))
    task = task or (evidence.get("task") if evidence.get("task") in tasks else tasks[0])
    if task not in tasks:
        raise PipelineEpisodeNotFound(f"pipeline run {run['id']} evaluated no {task!r} episode; "
                                      f"its tasks: {', '.join(tasks)}")
    cells: dict[int, dict[str, tuple[Any, ...]]] = {}
    for f in found:
        if f[2] == task:
            cells.setdefault(f[3], {})[f[1]] = f
    seeds = [{"seed": s, "sft": c["sft"][4], "trained": c["trained"][4], "diff": c["trained"][4] - c["sft"][4]}
             for s, c in sorted(cells.items()) if len(c) == len(ROLES)]
    if not seeds:
        raise PipelineEpisodeNotFound(f"no holdout seed of {task} has both an SFT and a trained episode")
    default = seeds[0]
    for s in seeds:  # the first seed with the largest gap (the first seed when every gap is zero)
        if abs(s["diff"]) > abs(default["diff"]):
            default = s
    if seed is None:
        seed = int(default["seed"])
    elif seed not in cells or len(cells[seed]) < len(ROLES):
        raise PipelineEpisodeNotFound(f"holdout seed {seed} of {task} was not evaluated for both sft and trained "
                                      f"in pipeline run {run['id']}")

    sides = {}
    for role, label in ROLES:
        rowid, _, _, _, ret, has_replay = cells[seed][role]
        replay = con.execute("SELECT replay FROM episodes WHERE rowid = ?", (rowid,)).fetchone()[0]
        record = json.loads(replay) if replay else {}
        sides[role] = {"role": role, "label": label, "policy": policies[role], "episode_return": ret,
                       "ref": eval_ref(eval_run, rowid) if has_replay else None,
                       "seat": record.get("seat") or "lab_0", "rounds": _rounds(record)}
    return {"run_id": run["id"], "eval_run_id": eval_run, "task": task, "split": "holdout", "seed": seed,
            "tasks": tasks, "seeds": seeds, "default_seed": default["seed"],
            "diff": sides["trained"]["episode_return"] - sides["sft"]["episode_return"], "sides": sides,
            "task_summary": task_summary(evidence, str(task))}


# what the task summary keeps of an evaluation row and of a paired comparison
SUMMARY_ROW = ("n", "mean", "deal_rate", "gain_share", "surplus_over_batna", "welfare_ratio")
SUMMARY_COMPARISON = ("comparison", "n", "mean_diff", "ci_low", "ci_high", "wins", "losses")


def task_summary(evidence: dict[str, Any], task: str) -> dict[str, Any]:
    """The evidence on ``task`` over all its holdout worlds: each evaluated role's row (return, deal
    rate, gain share, surplus) and the paired comparisons, so the one world shown sits beside the whole."""
    roles = [{"role": str(r.get("role") or r.get("policy")), **{k: r.get(k) for k in SUMMARY_ROW}}
             for r in evidence.get("results") or [] if isinstance(r, dict) and r.get("task") == task]
    comparisons = [{k: c.get(k) for k in SUMMARY_COMPARISON}
                   for c in evidence.get("comparisons") or [] if isinstance(c, dict) and c.get("task") == task]
    return {"roles": roles, "comparisons": comparisons}


def add_pipeline_routes(router: APIRouter, read: Reader, db: str | None) -> None:
    """The pipeline routes on the dashboard's router; ``read`` runs a function on the read-only store."""

    def pipeline_or_404(run_id: int) -> dict[str, Any]:
        run = read(load_pipeline, run_id)
        if run is None:
            raise PipelineNotFound(f"no pipeline run {run_id} in the store (training runs of kind pipeline: "
                                   "GET /api/training/runs?kind=pipeline)")
        return run

    @router.get("/training/pipelines/latest", summary="The newest pipeline run with evidence: stage runs, comparisons",
                responses=responses(404))
    async def latest() -> dict[str, Any]:
        run = read(latest_pipeline)
        if run is None:
            raise PipelineNotFound("no pipeline run with evidence in the store; this command makes one: "
                                   + pipeline_command(db), extra={"command": pipeline_command(db)})
        return pipeline_view(pipeline_or_404(run["id"]))

    @router.get("/training/pipelines/{run_id}", summary="One pipeline run: stage runs, stages, evidence",
                responses=responses(404, 422))
    async def pipeline(run_id: int) -> dict[str, Any]:
        return pipeline_view(pipeline_or_404(run_id))

    @router.get("/training/pipelines/{run_id}/compare",
                summary="Before vs after: the SFT start's and the trained model's episodes of one holdout world",
                responses=responses(404, 422))
    async def compare(run_id: int,
                      task: Annotated[TaskName | None, Query(description="default: the training task")] = None,
                      seed: Annotated[int | None, Query(ge=0, le=MAX_SEED, description="a holdout seed; default: "
                                                        "where the two returns differ most")] = None
                      ) -> dict[str, Any]:
        run = pipeline_or_404(run_id)
        out = read(compare_episodes, run, task, seed)
        if out is None:  # the store went away between the two reads
            raise PipelineNotFound(f"no pipeline run {run_id} in the store")
        return dict(out)


__all__ = ["PipelineEpisodeNotFound", "PipelineNotFound", "add_pipeline_routes", "compare_episodes", "headline",
           "latest_pipeline", "pipeline_command", "pipeline_view", "stage_runs"]
