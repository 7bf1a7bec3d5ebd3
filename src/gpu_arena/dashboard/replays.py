"""Replays and forks of stored episodes: ``GET /api/episodes``, ``GET /api/episodes/{ref}/frames``,
``POST /api/episodes/{ref}/fork?step=k``.

A stored episode is a seed and every seat's actions; the core is deterministic, so replaying the
actions rebuilds every step exactly (and is checked against the recorded transcript, round by
round). *Frames* are what the dashboard's scrubber steps through: frame 0 is the reset, frame k
the state after k rounds, each with the seat's own observation (the same fields a live session
shows), the round's actions, results and rewards of every seat, and the auctions with the
judge's scores and reasons for every pitch. A finished episode hides nothing any more: its seed
regenerates the whole world, so its replay shows every pitch's score, not only the seat's own.

A *fork* opens a new REST session at step k of a stored episode: the world, every policy's state
and the clock stand where they stood; from there the session is an ordinary one, driven by
``/api/sessions/{id}/step`` or ``/autostep``.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import Field

from ..core.engine import Episode
from ..core.judge import recorded_judge
from ..core.records import action_from_record
from ..models import observation_from_view
from ..server.environment import MAX_NAME, MAX_SEED, JudgeMode, ServedArenaEnv, SplitName, TaskName
from ..server.episodes import EPISODE_REF_PATTERN, list_episodes, load_episode
from ..server.errors import EpisodeNotFound, InvalidForkStep, ReplayMismatch, responses
from ..server.recorder import EpisodeRecorder
from ..server.routes import SessionView
from ..server.sessions import SessionManager
from ..server.settings import ServerSettings

EpisodeRef = Annotated[str, Path(pattern=EPISODE_REF_PATTERN,
                                 description="a served episode's replay id, or eval-<run>-<n> (GET /api/episodes)")]
FRAME_CACHE = 16  # replays recomputed on a cache miss cost tens of milliseconds; a scrubber asks once


class ForkView(SessionView):
    """A new session forked from a stored episode (``POST /api/episodes/{ref}/fork``)."""

    forked_from: str = Field(description="the stored episode's reference")
    fork_step: int = Field(description="rounds of the stored episode replayed before this session took over")


def replay_frames(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every step of a stored episode (see the module docstring); raises :class:`ReplayMismatch`
    when the record does not replay to its own transcript."""
    try:
        transcript = list(record["transcript"])
        seat = str(record.get("seat") or "lab_0")
        episode = Episode.new(str(record["task"]), str(record["split"]), int(record["seed"]), controlled=(seat,),
                              judge_mode=str(record.get("judge_mode") or "none"), judge=recorded_judge(transcript))
    except (KeyError, TypeError, ValueError) as e:
        raise ReplayMismatch(f"the stored record cannot be replayed: {e}") from None
    frames = [_frame(episode, seat, 0, None)]
    for i, rnd in enumerate(transcript):
        if episode.done:
            raise ReplayMismatch(f"the replay ended before round {i} of the record")
        try:
            episode.step({lid: action_from_record(a) for lid, a in rnd["actions"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ReplayMismatch(f"round {i} of the record cannot be replayed: {e}") from None
        if _plain(episode.transcript[-1]) != _plain(rnd):
            raise ReplayMismatch(f"round {i} replays differently from the record (recorded by other code?)")
        frames.append(_frame(episode, seat, i + 1, rnd))
    return frames


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _frame(episode: Episode, seat: str, step: int, rnd: dict[str, Any] | None) -> dict[str, Any]:
    w = episode.world
    obs = observation_from_view(episode.observe(seat), metadata={"task": w.task, "split": w.split, "seed": w.seed,
                                                                 "step": step})
    return {
        "step": step, "round_index": w.round_index, "max_rounds": w.max_rounds, "done": w.done,
        "observation": obs.model_dump(mode="json"),
        "reward": obs.reward if step else None,
        "cumulative": episode.returns[seat], "returns": dict(episode.returns),
        "round": None if rnd is None else {k: rnd[k] for k in ("round", "order", "actions", "results", "rewards")
                                           if k in rnd},
        "auctions": [asdict(a) for a in w.auctions.values()],
    }


def build_replay_router(settings: ServerSettings, manager: SessionManager,
                        recorder: EpisodeRecorder | None) -> APIRouter:
    router = APIRouter(prefix="/api", tags=["Episodes"])
    cache: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()

    def record_for(ref: str) -> dict[str, Any]:
        record = load_episode(settings, recorder, ref)
        if record is None:
            raise EpisodeNotFound(f"no stored episode {ref!r}")
        return record

    def frames_for(ref: str, record: dict[str, Any]) -> list[dict[str, Any]]:
        key = (ref, hashlib.sha256(json.dumps(record["transcript"]).encode()).hexdigest())
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        frames = replay_frames(record)
        cache[key] = frames
        while len(cache) > FRAME_CACHE:
            cache.popitem(last=False)
        return frames

    @router.get("/episodes", summary="Stored episodes (served, and evaluation episodes with replays), newest first",
                responses=responses(422))
    async def episodes(source: Literal["all", "served", "eval", "league"] = "all", task: TaskName | None = None,
                       split: SplitName | None = None, seed: int | None = Query(None, ge=0, le=MAX_SEED),
                       judge_mode: JudgeMode | None = None,
                       policy: str | None = Query(None, max_length=4 * MAX_NAME),
                       limit: int = Query(50, ge=1, le=500)) -> dict[str, Any]:
        rows = list_episodes(settings, source=source, task=task, split=split, seed=seed, judge_mode=judge_mode,
                             policy=policy, limit=limit)
        return {"episodes": rows, "limit": limit}

    @router.get("/episodes/{ref}/frames", summary="A stored episode replayed step by step",
                responses=responses(404, 409, 422))
    async def frames(ref: EpisodeRef) -> dict[str, Any]:
        record = record_for(ref)
        steps = frames_for(ref, record)
        meta = {k: record.get(k) for k in ("ref", "source", "task", "split", "seed", "seat", "judge_mode",
                                           "opponents", "policy", "episode_return", "created_at", "run_id",
                                           "forked_from")}
        return {**meta, "steps": len(steps) - 1, "frames": steps}

    @router.post("/episodes/{ref}/fork", status_code=201, response_model=ForkView,
                 summary="Open a new session at step k of a stored episode and play on from there",
                 responses=responses(404, 409, 410, 422, 429))
    async def fork(ref: EpisodeRef, step: int = Query(0, ge=0, le=10_000,
                                                      description="rounds of the record to replay first")) -> ForkView:
        record = record_for(ref)
        rounds = len(record.get("transcript") or [])
        if step >= rounds:
            raise InvalidForkStep(f"step must be in 0..{rounds - 1}: the episode has {rounds} rounds "
                                  "and a fork must leave at least one to play")
        session = manager.create()
        origin = {"ref": ref, "step": step}

        def replay(env: ServedArenaEnv) -> tuple[Any, int]:
            return env.replay_rounds(record, step, origin), step

        try:
            obs, steps = await manager.run(session.session_id, replay)
        except BaseException:
            await manager.close(session.session_id)  # a refused fork must not hold a slot
            raise
        meta = obs.metadata or {}
        return ForkView(session_id=session.session_id, episode_id=meta.get("episode_id"), observation=obs,
                        reward=obs.reward, done=obs.done, step_count=steps, replay_id=meta.get("replay_id"),
                        idle_timeout_s=settings.idle_timeout_s, forked_from=ref, fork_step=step)

    return router


__all__ = ["ForkView", "build_replay_router", "replay_frames"]
