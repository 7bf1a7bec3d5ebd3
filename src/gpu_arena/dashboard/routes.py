"""The dashboard: the static page at ``/`` and the JSON it reads (``/api/overview``, ``/api/results/latest``,
``/api/auto-eval``, ``/api/training/...``; replays in :mod:`.replays`, pipeline runs and Before vs after in
:mod:`.pipelines`, the Reference section in :mod:`.reference`).

Every number the page shows comes from these routes or the session routes: the registries of the
code (tasks, action types, reward columns, policies) and the SQLite store (evaluation runs). The
page itself is plain HTML, CSS and ES modules shipped inside the package (``gpu_arena/web``), so it
works offline and needs no build step.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, FastAPI, Query
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from .. import __version__
from ..core.rules import JUDGE_MODES
from ..core.types import ACTION_TYPES, COMPONENT_COLUMNS, PENALTY_COLUMNS, REWARD_COLUMNS, SPLITS, TASKS
from ..evaluation.store import StoreError, db_path, latest_run, latest_run_for_split
from ..policies import ARCHETYPES, BASELINES, DEFAULT_OPPONENTS, policy_names
from ..server.environment import seat_policies, task_spec
from ..server.episodes import open_store_read_only
from ..server.errors import TrainingRunNotFound, responses
from ..server.settings import ServerSettings
from ..training.runlog import METRIC_KEYS, list_training_runs, load_training_run
from .autoeval import AutoEval
from .pipelines import add_pipeline_routes, headline, latest_pipeline, pipeline_command

ASSETS_URL = "/assets"


def web_dir() -> Path:
    """The packaged dashboard assets (a real directory: the package is installed unzipped)."""
    return Path(str(resources.files("gpu_arena") / "web"))


def run_summary(run: dict[str, Any] | None) -> dict[str, Any] | None:
    """What "At a glance" shows of a run: provenance and coverage, not the rows themselves."""
    if run is None:
        return None
    rows = run["results"]
    return {
        "id": run["id"], "kind": run["kind"], "created_at": run["created_at"], "git_commit": run["git_commit"],
        "duration_s": run["duration_s"], "args": run["args"],
        "splits": sorted({r["split"] for r in rows}), "tasks": sorted({r["task"] for r in rows}, key=_task_order),
        "policies": list(dict.fromkeys(r["policy"] for r in rows)),
        "rows": len(rows), "episodes": sum(int(r["n"]) for r in rows),
    }


def _task_order(task: str) -> int:
    return TASKS.index(task) if task in TASKS else len(TASKS)


def eval_command(split: str, settings: ServerSettings) -> str:
    """The command that stores an evaluation run this server can show (same store, same split)."""
    db = f" --db {settings.db}" if settings.db else ""
    return f"gpu-arena eval --split {split} --seeds 20{db}"


def opponent_policies() -> list[str]:
    """What a visitor may put in the other seats of a session: the world's archetypes, or any
    registered name (an LLM policy registered under a plain name included; ``llm:`` families are
    not offered, see :func:`seat_policies`)."""
    return [DEFAULT_OPPONENTS, *policy_names()]


def sft_command(settings: ServerSettings) -> str:
    """The command that writes an SFT dataset where the dashboard looks for one (beside the store)."""
    return f"gpu-arena data sft --output {db_path(settings.db).parent / 'sft'}"


# The CLI's commands that make a dataset or a training run, as the Training section lists them. A
# constant, so that the dashboard never imports the CLI; a test checks it against the CLI's own
# command tree (tests/dashboard/test_dashboard_training.py).
TRAINING_COMMANDS = (
    "gpu-arena data sft",
    "gpu-arena train compare --help",
    "gpu-arena train evidence --help",
    "gpu-arena train grpo --help",
    "gpu-arena train pipeline --help",
    "gpu-arena train prepare --help",
    "gpu-arena train rft --help",
    "gpu-arena train sft --help",
)


# what the Training section lists of a run (its config and versions come with the run itself)
# the kinds of training run "At a glance" shows the newest of (pipelines have a card of their own)
TRAINING_KINDS = ("sft", "rft", "grpo")
_BRIEF_KEYS = ("id", "kind", "status", "created_at", "finished_at", "git_commit", "preset", "model", "duration_s",
               "n_logs", "last_step", "summary")


def _run_brief(run: dict[str, Any]) -> dict[str, Any]:
    return {k: run.get(k) for k in _BRIEF_KEYS}


# what the Leaderboard shows while the store holds no league
LEAGUE_COMMAND = ("gpu-arena league run --entrants rule_expert,greedy_hoarder,no_negotiation,always_accept,random_valid "
                  "--tasks market_round --matches 200 --workers 2")


def build_dashboard_router(settings: ServerSettings, auto_eval: AutoEval | None = None) -> APIRouter:
    router = APIRouter(prefix="/api", tags=["Dashboard"])

    def load(split: str | None) -> dict[str, Any] | None:
        con = open_store_read_only(settings)
        if con is None:
            return None
        try:
            with closing(con):
                return latest_run(con) if split is None else latest_run_for_split(con, split)
        except sqlite3.OperationalError:  # a store from before the results tables: nothing to show
            return None

    @router.get("/league", summary="The newest league: ratings, matches, mean surplus and the cross-play matrix")
    async def league() -> dict[str, Any]:
        from ..league import league_table

        con = open_store_read_only(settings)
        if con is None:
            return {"league": None, "command": LEAGUE_COMMAND}
        try:
            with closing(con):
                return league_table(con=con)
        except (LookupError, sqlite3.OperationalError):  # no league yet (or a store from before leagues)
            return {"league": None, "command": LEAGUE_COMMAND}

    @router.get("/overview", summary="Tasks, actions, reward columns, policies and the latest evaluation")
    async def overview() -> dict[str, Any]:
        # the page starts from this: a store row changed by hand leaves its section empty and is
        # named under store_problems, rather than failing the whole page
        problems: list[str] = []

        def readable(fn: Any, default: Any = None) -> Any:
            try:
                return fn()
            except StoreError as e:
                problems.append(str(e))
                return default

        return {
            "version": __version__,
            "tasks": [{k: v for k, v in task_spec(SPLITS[0], i).items() if k in ("task", "labs", "rounds", "shocks")}
                      for i in range(len(TASKS))],
            "splits": list(SPLITS),
            "action_types": list(ACTION_TYPES),
            "reward_columns": {"components": list(COMPONENT_COLUMNS), "penalties": list(PENALTY_COLUMNS),
                               "total": REWARD_COLUMNS[-1], "all": list(REWARD_COLUMNS)},
            "policies": {"all": policy_names(), "seat": seat_policies(), "baselines": list(BASELINES),
                         "archetypes": sorted(ARCHETYPES), "default_opponents": DEFAULT_OPPONENTS,
                         "opponents": opponent_policies()},
            "judge_modes": list(JUDGE_MODES),
            "latest_eval": readable(lambda: run_summary(load(None))),
            "auto_eval": auto_eval.status() if auto_eval is not None else None,
            "training": training_overview(readable),
            "store_problems": problems,
        }

    def read_training(fn: Any, *args: Any, **kwargs: Any) -> Any:
        con = open_store_read_only(settings)
        if con is None:
            return None
        try:
            with closing(con):
                return fn(con, *args, **kwargs)
        except sqlite3.OperationalError:  # a store from before the training tables: no run
            return None

    def training_overview(readable: Callable[..., Any] = lambda fn, default=None: fn()) -> dict[str, Any]:
        """The overview's training section; ``readable(fn, default)`` reads the store (the overview's
        own keeps going past a row changed by hand; by default an unreadable row raises)."""
        runs = readable(lambda: read_training(list_training_runs)) or []
        message = ("no training runs in the store" if not runs else
                   f"{len(runs)} training run{'s' if len(runs) > 1 else ''} in the store")
        commands = [sft_command(settings) if c == "gpu-arena data sft" else c for c in TRAINING_COMMANDS]
        latest = {kind: next((_run_brief(r) for r in runs if r["kind"] == kind), None) for kind in TRAINING_KINDS}
        pipeline = readable(lambda: read_training(latest_pipeline))
        return {"wired": True, "runs_in_store": len(runs), "message": message, "commands": commands,
                "latest": latest, "pipeline": headline(pipeline) if pipeline else None,
                "pipeline_command": pipeline_command(settings.db)}

    @router.get("/training/runs", summary="Training runs in the store, newest first (SFT, expert iteration, GRPO, "
                                          "pipelines)")
    async def training_runs(kind: Literal["sft", "rft", "grpo", "pipeline"] | None = Query(None),
                            limit: int = Query(50, ge=1, le=500)) -> dict[str, Any]:
        runs = read_training(list_training_runs, kind=kind, limit=limit) or []
        return {"runs": [_run_brief(r) for r in runs], "metric_keys": METRIC_KEYS,
                "commands": training_overview()["commands"]}

    @router.get("/training/runs/{run_id}", summary="One training run: config, summary and every logged metric series",
                responses=responses(404))
    async def training_run(run_id: int) -> dict[str, Any]:
        run = read_training(load_training_run, run_id)
        if run is None:
            raise TrainingRunNotFound(f"no training run {run_id} in the store")
        return run

    add_pipeline_routes(router, read_training, settings.db)

    @router.get("/auto-eval", summary="The first-run background evaluation: off, skipped, running, done or failed")
    async def auto_eval_status() -> dict[str, Any]:
        if auto_eval is None:
            return {"enabled": False, "state": "off", "message": "not configured"}
        return auto_eval.status()

    @router.get("/results/latest", summary="The latest evaluation run's rows for one split")
    async def results_latest(split: Literal["train", "holdout"] = Query("holdout")) -> dict[str, Any]:
        run = load(split)
        rows = [r for r in run["results"] if r["split"] == split] if run else []
        rows.sort(key=lambda r: _task_order(r["task"]))  # stable: keeps the run's policy order per task
        return {"split": split, "run": run_summary(run), "rows": rows, "command": eval_command(split, settings)}

    return router


def install_dashboard(app: FastAPI, settings: ServerSettings, auto_eval: AutoEval | None = None) -> None:
    """Serve the page at ``/``, its assets under :data:`ASSETS_URL`, and the dashboard's JSON routes."""
    app.include_router(build_dashboard_router(settings, auto_eval))
    assets = web_dir()
    app.mount(ASSETS_URL, StaticFiles(directory=assets), name="assets")

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        # no-cache: the page is tiny and must never pair an old index with new modules
        return FileResponse(assets / "index.html", headers={"Cache-Control": "no-cache"})
