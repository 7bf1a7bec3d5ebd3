"""The dashboard's Reference section, from the code: reward design, action space, an SFT sample,
downloadable artifacts and runnable API examples (``/api/reference/*``, ``/api/artifacts*``).

Nothing here restates a number: reward columns come from ``core.types``, which event books to
which column from ``core.rules.CATEGORY_COLUMNS``, penalties and caps from ``core.engine``, judge
weights from ``core.judge``, the action space from ``ArenaAction``'s JSON schema and the per-type
field lists of ``gpu_arena.llm.tools`` (the same ones the LLM agents are given). The prose that
explains each ledger category sits beside the registry it explains, keyed by it, and a test keeps
the two in step.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, Response, StreamingResponse

from ..core import engine, judge
from ..core.rules import (
    CATEGORY_COLUMNS,
    COALITION_TTL_DEFAULT,
    COALITION_TTL_MAX,
    MAX_LIST,
    MAX_MESSAGE_CHARS,
    MAX_OPEN_OFFERS,
    MAX_OPEN_PROPOSALS,
    MAX_PAYMENT,
    OFFER_TTL_DEFAULT,
    OFFER_TTL_MAX,
)
from ..core.types import ACTION_TYPES, COMPONENT_COLUMNS, CONDITION_KEYS, PENALTY_COLUMNS, REWARD_COLUMNS
from ..evaluation.store import db_path, latest_run_for_split
from ..llm.tools import ACTION_DESCRIPTIONS, ACTION_FIELDS, REQUIRED_FIELDS, action_schema
from ..models import ArenaAction
from ..server.environment import ResetArgs
from ..server.episodes import eval_ref, open_store_read_only
from ..server.errors import EpisodeNotFound, responses
from ..server.settings import ServerSettings
from .routes import sft_command

# What books a potential change to each ledger category (core.rules.CATEGORY_COLUMNS): the seat's
# actions whose outcome carries the category, and the clock phases (core.engine.Episode._tick).
CATEGORY_EVENTS: dict[str, dict[str, Any]] = {
    "deal": {"actions": ["accept_offer"],
             "clock": [],
             "what": "an accepted offer settles: blocks and money change hands atomically"},
    "allocation": {"actions": ["reserve_capacity", "release_capacity", "allocate_to_job", "finish"],
                   "clock": ["jobs settle at their deadlines", "the final settlement after the last round"],
                   "what": "blocks are planned, allocated or released; jobs are realised"},
    "coalition": {"actions": ["commit_to_coalition", "release_capacity"],
                  "clock": [],
                  "what": "a coalition forms when the last member consents; withdrawing a committed block "
                          "is a breach (shares of the pooled job are lost)"},
    "judge": {"actions": [],
              "clock": ["an auction's pitching window closes and the block is awarded"],
              "what": "the contested block goes to the best bid, or in judge mode to the best-judged pitch "
                      "(make_pitch and counter_pitch themselves move nothing until the award)"},
    "time": {"actions": [],
             "clock": ["a block's window opens while it is unallocated (it idles)"],
             "what": "what an unused block could still have done is lost: the cost of negotiating too long"},
    "shock": {"actions": [],
              "clock": ["a scheduled market shock fires"],
              "what": "capacity failure, new supply, energy spike, reliability downgrade, deadline "
                      "acceleration, demand surge or an emergency auction changes what holdings are worth"},
}
assert set(CATEGORY_EVENTS) == set(CATEGORY_COLUMNS)
assert all(a in ACTION_TYPES for e in CATEGORY_EVENTS.values() for a in e["actions"])

PENALTIES: dict[str, dict[str, Any]] = {
    "invalid_action_penalty": {"each": -engine.PENALTY_INVALID, "cap": -engine.PENALTY_INVALID,
                               "what": "an action the rules refuse (it becomes a wait and changes nothing else)"},
    "spam_penalty": {"each": -engine.PENALTY_SPAM, "cap": -engine.SPAM_CAP,
                     "what": "the same non-wait action repeated, or a reservation left to lapse"},
    "breach_penalty": {"each": -engine.PENALTY_BREACH, "cap": -engine.BREACH_CAP,
                       "what": "a broken commitment: a committed block withdrawn, a must-allocate condition unmet"},
}
assert set(PENALTIES) == set(PENALTY_COLUMNS)

SFT_GLOBS = ("*sft*.jsonl", "*sft*/*.jsonl", "*/*sft*.jsonl", "*/*sft*/*.jsonl")
MAX_SAMPLE_BYTES = 256 * 1024


def _paragraphs(doc: str | None) -> list[str]:
    return [" ".join(p.split()) for p in (doc or "").strip().split("\n\n") if p.strip()]


def reward_design() -> dict[str, Any]:
    """The 11 columns, what moves each, the penalties' sizes and caps, and the judge's weights."""
    moved_by: dict[str, list[dict[str, Any]]] = {c: [] for c in COMPONENT_COLUMNS}
    for category, (value_col, money_col) in CATEGORY_COLUMNS.items():
        ev = CATEGORY_EVENTS[category]
        parts = ["value and money"] if value_col == money_col else ["value"]
        moved_by[value_col].append({"category": category, "part": parts[0], **ev})
        if money_col != value_col:
            moved_by[money_col].append({"category": category, "part": "money", **ev})
    columns: list[dict[str, Any]] = []
    for c in REWARD_COLUMNS:
        if c in COMPONENT_COLUMNS:
            columns.append({"name": c, "kind": "component", "moved_by": moved_by[c]})
        elif c in PENALTY_COLUMNS:
            columns.append({"name": c, "kind": "penalty", **PENALTIES[c]})
        else:
            columns.append({"name": c, "kind": "total",
                            "what": "the step reward: the sum of the other ten columns, in [-1, 1]"})
    return {
        "doc": _paragraphs(engine.__doc__)[1:],  # the reward paragraphs, after the module's one-line summary
        "columns": columns,
        "categories": {k: {"columns": list(v), **CATEGORY_EVENTS[k]} for k, v in CATEGORY_COLUMNS.items()},
        "penalty_bound": engine.PENALTY_BOUND,
        "judge": {"weights": {"urgency": judge.W_URGENCY, "evidence": judge.W_EVIDENCE, "fairness": judge.W_FAIRNESS},
                  "doc": _paragraphs(judge.__doc__)},
    }


def action_space() -> dict[str, Any]:
    """Every action type with the fields it reads (JSON schema each), what the rules require, and limits."""
    fields = ArenaAction.model_fields
    types = []
    for t in ACTION_TYPES:
        schema = action_schema(t)
        types.append({"type": t, "description": ACTION_DESCRIPTIONS[t], "required": list(REQUIRED_FIELDS.get(t, ())),
                      "fields": [{"name": name, "schema": schema["properties"][name],
                                  "required": name in REQUIRED_FIELDS.get(t, ()),
                                  "description": fields[name].description or ""} for name in ACTION_FIELDS[t]]})
    return {
        "action_types": types,
        "condition_keys": list(CONDITION_KEYS),
        "limits": {"max_message_chars": MAX_MESSAGE_CHARS, "max_list": MAX_LIST, "max_payment": MAX_PAYMENT,
                   "max_open_offers": MAX_OPEN_OFFERS, "max_open_proposals": MAX_OPEN_PROPOSALS,
                   "offer_expires_in": {"default": OFFER_TTL_DEFAULT, "max": OFFER_TTL_MAX},
                   "coalition_expires_in": {"default": COALITION_TTL_DEFAULT, "max": COALITION_TTL_MAX}},
        "doc": _paragraphs(ArenaAction.__doc__),
        "schema": ArenaAction.model_json_schema(),
        "reset_schema": ResetArgs.model_json_schema(),
    }


def find_sft_dataset(settings: ServerSettings) -> Path | None:
    """The newest SFT dataset (a JSONL whose name or folder says ``sft``) under the store's folder."""
    root = db_path(settings.db).resolve().parent
    if not root.is_dir():
        return None
    found = {p for pattern in SFT_GLOBS for p in root.glob(pattern) if p.is_file()}
    return max(found, key=lambda p: (p.stat().st_mtime, str(p))) if found else None


def sft_sample(settings: ServerSettings) -> dict[str, Any]:
    """The first record of the newest SFT dataset, or where to get one."""
    base = {"command": sft_command(settings), "searched": "the store's folder (files named *sft*.jsonl, also one "
                                                          "folder down)"}
    path = find_sft_dataset(settings)
    if path is None:
        return {**base, "dataset": None, "sample": None}
    root = db_path(settings.db).resolve().parent
    stat = path.stat()
    dataset = {"name": str(path.relative_to(root)), "bytes": stat.st_size,
               "modified": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stat.st_mtime)),
               "download": "/api/artifacts/sft.jsonl"}
    provenance = path.parent / "provenance.json"  # written beside the JSONL by gpu_arena.training.data
    if provenance.is_file() and provenance.stat().st_size <= MAX_SAMPLE_BYTES:
        with contextlib.suppress(ValueError):  # unreadable provenance: the sample still shows
            dataset["provenance"] = json.loads(provenance.read_text())
    with path.open("rb") as fh:
        first = fh.readline(MAX_SAMPLE_BYTES)
    try:
        sample = json.loads(first)
    except ValueError:
        return {**base, "dataset": dataset, "sample": None,
                "problem": "its first line is not one JSON record (or longer than 256 KiB)"}
    return {**base, "dataset": dataset, "sample": sample}


def api_examples(base: str) -> list[dict[str, str]]:
    """Runnable examples against this server (``base``: its URL as the browser reached it)."""
    rest = f'''import json, urllib.request

BASE = "{base}"

def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method,
                                 headers={{"Content-Type": "application/json"}})
    with urllib.request.urlopen(req) as r:
        return json.load(r)

view = call("POST", "/api/sessions", {{"task": "single_trade", "seed": 7}})
sid, total = view["session_id"], 0.0
while not view["done"]:
    view = call("POST", f"/api/sessions/{{sid}}/step", {{"action_type": "allocate_to_job"}})
    total += view["reward"]
print("return", round(total, 6), "replay", view["replay_id"])
'''
    ws = f'''from gpu_arena.client import GpuArenaClient
from gpu_arena.models import ArenaAction

with GpuArenaClient(base_url="{base}").sync() as env:
    result = env.reset(task="market_round", seed=3)
    while not result.done:
        result = env.step(ArenaAction(action_type="wait"))
    print(result.observation.reward_breakdown)
'''
    return [
        {"title": "Open a session (REST)", "language": "bash",
         "code": f"curl -s -X POST {base}/api/sessions -H 'Content-Type: application/json' "
                 "-d '{\"task\": \"single_trade\", \"seed\": 7}'"},
        {"title": "Play one round in it (use the session_id it returned)", "language": "bash",
         "code": f"curl -s -X POST {base}/api/sessions/SESSION_ID/step -H 'Content-Type: application/json' "
                 "-d '{\"action_type\": \"wait\"}'"},
        {"title": "The latest evaluation (CSV)", "language": "bash",
         "code": f"curl -s '{base}/api/artifacts/results.csv?split=holdout'"},
        {"title": "Stored episodes, and one replayed step by step", "language": "bash",
         "code": f"curl -s '{base}/api/episodes?limit=5'\ncurl -s {base}/api/episodes/REF/frames"},
        {"title": "Fork a stored episode at step 1 into a new session", "language": "bash",
         "code": f"curl -s -X POST '{base}/api/episodes/REF/fork?step=1'"},
        {"title": "A whole episode over REST (Python, standard library only)", "language": "python", "code": rest},
        {"title": "The same over WebSocket with the typed OpenEnv client", "language": "python", "code": ws},
    ]


def _latest(settings: ServerSettings, split: str) -> dict[str, Any] | None:
    con = open_store_read_only(settings)
    if con is None:
        return None
    try:
        with closing(con):
            return latest_run_for_split(con, split)
    except sqlite3.OperationalError:
        return None


def _replay_count(settings: ServerSettings, run_id: int) -> int:
    con = open_store_read_only(settings)
    if con is None:
        return 0
    try:
        with closing(con):
            row = con.execute("SELECT count(*) FROM episodes WHERE run_id = ? AND replay IS NOT NULL",
                              (run_id,)).fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(row[0])


def results_csv(rows: list[dict[str, Any]]) -> str:
    """A run's rows as CSV: every key any row has, in first-seen order; nested values as JSON."""
    columns: dict[str, None] = {}
    for r in rows:
        columns.update(dict.fromkeys(r))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in r.items()})
    return out.getvalue()


def build_reference_router(settings: ServerSettings) -> APIRouter:
    router = APIRouter(prefix="/api", tags=["Dashboard"])

    @router.get("/reference/reward", summary="Reward design: the 11 columns and what moves each")
    async def reward() -> dict[str, Any]:
        return reward_design()

    @router.get("/reference/actions", summary="The action space: every action type's fields (JSON schema)")
    async def actions() -> dict[str, Any]:
        return action_space()

    @router.get("/reference/sft-sample", summary="One record of the newest SFT dataset beside the store")
    async def sft() -> dict[str, Any]:
        return sft_sample(settings)

    @router.get("/reference/examples", summary="Runnable curl and Python examples against this server")
    async def examples(request: Request) -> dict[str, Any]:
        base = str(request.base_url).rstrip("/")
        return {"base_url": base, "docs": f"{base}/docs", "openapi": f"{base}/openapi.json",
                "examples": api_examples(base)}

    @router.get("/artifacts", summary="What can be downloaded from this server's store")
    async def artifacts() -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for split in ("holdout", "train"):
            run = _latest(settings, split)
            if run is None:
                continue
            rows = [r for r in run["results"] if r["split"] == split]
            items.append({"kind": "results", "split": split, "run_id": run["id"], "format": "json", "rows": len(rows),
                          "href": f"/api/artifacts/results.json?split={split}"})
            items.append({"kind": "results", "split": split, "run_id": run["id"], "format": "csv", "rows": len(rows),
                          "href": f"/api/artifacts/results.csv?split={split}"})
            replays = _replay_count(settings, run["id"])
            if replays:
                items.append({"kind": "replays", "split": split, "run_id": run["id"], "format": "jsonl",
                              "rows": replays, "href": f"/api/artifacts/replays.jsonl?split={split}"})
        dataset = find_sft_dataset(settings)
        if dataset is not None:
            items.append({"kind": "dataset", "split": None, "run_id": None, "format": "jsonl", "rows": None,
                          "name": dataset.name, "href": "/api/artifacts/sft.jsonl"})
        return {"artifacts": items, "episode_replay": "/api/episodes/{ref} (one stored episode as JSON)"}

    def run_or_404(split: str) -> dict[str, Any]:
        run = _latest(settings, split)
        if run is None:
            raise EpisodeNotFound(f"no evaluation run for {split} in the store", code="run_not_found")
        return run

    @router.get("/artifacts/results.json", summary="The latest evaluation run for a split (download)",
                responses=responses(404, 422))
    async def results_json(split: Literal["train", "holdout"] = Query("holdout")) -> Response:
        run = run_or_404(split)
        body = {**run, "results": [r for r in run["results"] if r["split"] == split]}
        return Response(json.dumps(body, indent=1), media_type="application/json",
                        headers={"Content-Disposition": f'attachment; filename="gpu-arena-run{run["id"]}-{split}.json"'})

    @router.get("/artifacts/results.csv", summary="The latest evaluation run's rows for a split as CSV (download)",
                responses=responses(404, 422))
    async def results_csv_route(split: Literal["train", "holdout"] = Query("holdout")) -> Response:
        run = run_or_404(split)
        rows = [r for r in run["results"] if r["split"] == split]
        return Response(results_csv(rows), media_type="text/csv",
                        headers={"Content-Disposition": f'attachment; filename="gpu-arena-run{run["id"]}-{split}.csv"'})

    @router.get("/artifacts/replays.jsonl", summary="The latest evaluation run's kept replays, one JSON per line",
                responses=responses(404, 422))
    async def replays_jsonl(split: Literal["train", "holdout"] = Query("holdout")) -> StreamingResponse:
        run = run_or_404(split)
        run_id = int(run["id"])

        def lines() -> Iterator[bytes]:
            con = open_store_read_only(settings)
            if con is None:
                return
            with closing(con):
                for row_id, replay in con.execute("SELECT rowid, replay FROM episodes WHERE run_id = ? AND "
                                                  "replay IS NOT NULL ORDER BY rowid", (run_id,)):
                    yield (json.dumps({"ref": eval_ref(run_id, row_id), **json.loads(replay)},
                                      separators=(",", ":")) + "\n").encode()

        return StreamingResponse(lines(), media_type="application/x-ndjson", headers={
            "Content-Disposition": f'attachment; filename="gpu-arena-run{run_id}-{split}-replays.jsonl"'})

    @router.get("/artifacts/sft.jsonl", summary="The newest SFT dataset beside the store (download)",
                responses=responses(404))
    async def sft_download() -> FileResponse:
        path = find_sft_dataset(settings)
        if path is None:
            raise EpisodeNotFound(f"no SFT dataset beside the store; make one with `{sft_command(settings)}`",
                                  code="dataset_not_found")
        return FileResponse(path, media_type="application/x-ndjson", filename=path.name)

    return router


__all__ = ["action_space", "api_examples", "build_reference_router", "reward_design", "sft_sample"]
