"""The REST session API (``/api/sessions``) and the replay store (``/api/episodes``)."""

from __future__ import annotations

import weakref
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..core.policy import Policy
from ..models import ArenaAction, ArenaObservation, ArenaState
from ..policies import make_policy
from .environment import MAX_NAME, ResetArgs, ServedArenaEnv, seat_policies
from .episodes import EPISODE_REF_PATTERN, SERVED_REF, load_episode
from .errors import EpisodeNotFound, responses
from .recorder import EpisodeRecorder
from .sessions import SessionManager

SessionId = Annotated[str, Path(min_length=1, max_length=64, description="the id POST /api/sessions returned")]
ReplayId = Annotated[str, Path(pattern=EPISODE_REF_PATTERN, description="observation.metadata.replay_id of a last "
                                                                     "step, or eval-<run>-<n> (GET /api/episodes)")]


class SessionView(BaseModel):
    """One REST session's current observation (after create, reset, step, or on GET)."""

    session_id: str
    episode_id: str | None = None
    observation: ArenaObservation
    reward: float | None = None
    done: bool = False
    step_count: int = 0
    replay_id: str | None = Field(default=None, description="set on the last step: GET /api/episodes/{replay_id}")
    idle_timeout_s: float = Field(description="the session is closed after this long without a request")


class AutostepArgs(BaseModel):
    """Which policy chooses the seat's action this round (``POST /api/sessions/{id}/autostep``)."""

    model_config = ConfigDict(extra="forbid")

    policy: str = Field(default="rule_expert", max_length=MAX_NAME, description="a registered policy name")

    @field_validator("policy")
    @classmethod
    def _seat_policy(cls, v: str) -> str:
        known = seat_policies()
        if v not in known:
            raise ValueError(f"unknown policy {v[:MAX_NAME]!r}; known: {', '.join(known)}")
        return v


class AutostepView(SessionView):
    """The session after a round whose seat action a server-side policy chose."""

    policy: str
    action: dict[str, Any] = Field(description="the action the policy sent (wire fields), or {rejected, message}")


class SessionsSummary(BaseModel):
    active_sessions: int
    max_sessions: int
    idle_timeout_s: float


class Closed(BaseModel):
    session_id: str
    closed: bool = True


def _view(manager: SessionManager, session_id: str, obs: ArenaObservation, step_count: int) -> SessionView:
    meta = obs.metadata or {}
    return SessionView(session_id=session_id, episode_id=meta.get("episode_id"), observation=obs, reward=obs.reward,
                       done=obs.done, step_count=step_count, replay_id=meta.get("replay_id"),
                       idle_timeout_s=manager.settings.idle_timeout_s)


def _step_count(env: ServedArenaEnv) -> int:
    return env.state.step_count


def build_router(manager: SessionManager, recorder: EpisodeRecorder | None) -> APIRouter:
    """Routes over ``manager``'s sessions; ``recorder`` serves stored replays (None: the store is off)."""
    router = APIRouter(prefix="/api")

    @router.post("/sessions", status_code=201, response_model=SessionView, tags=["Sessions (REST)"],
                 summary="Open a session and reset it", responses=responses(404, 410, 413, 422, 429))
    async def create_session(args: Annotated[ResetArgs | None, Body()] = None) -> SessionView:
        reset_args = (args or ResetArgs()).model_dump(exclude_none=True)
        session = manager.create()
        try:
            obs, steps = await manager.run(session.session_id, lambda env: (env.reset(**reset_args), 0))
        except BaseException:
            await manager.close(session.session_id)  # a refused reset must not hold a slot
            raise
        return _view(manager, session.session_id, obs, steps)

    @router.get("/sessions", response_model=SessionsSummary, tags=["Sessions (REST)"], summary="Open sessions")
    async def sessions_summary() -> SessionsSummary:
        return SessionsSummary(active_sessions=manager.active, max_sessions=manager.settings.max_sessions,
                               idle_timeout_s=manager.settings.idle_timeout_s)

    @router.get("/sessions/{session_id}", response_model=SessionView, tags=["Sessions (REST)"],
                summary="The seat's current view", responses=responses(404, 410, 422))
    async def get_session(session_id: SessionId) -> SessionView:
        obs, steps = await manager.run(session_id, lambda env: (env.observe_current(), _step_count(env)))
        return _view(manager, session_id, obs, steps)

    @router.post("/sessions/{session_id}/step", response_model=SessionView, tags=["Sessions (REST)"],
                 summary="Play one round", responses=responses(404, 410, 413, 422))
    async def step_session(session_id: SessionId, action: ArenaAction) -> SessionView:
        obs, steps = await manager.run(session_id, lambda env: (env.step(action), _step_count(env)))
        return _view(manager, session_id, obs, steps)

    # one policy object per session and episode: a policy may keep state across rounds (an RNG,
    # memory), so it is made once per episode rather than per request; weak keys drop it with the session
    seat_drivers: weakref.WeakKeyDictionary[ServedArenaEnv, tuple[object, str, Policy]] = weakref.WeakKeyDictionary()

    def driver_for(env: ServedArenaEnv, name: str) -> Policy:
        episode = env.episode
        held = seat_drivers.get(env)
        if held is not None and held[0] is episode and held[1] == name:
            return held[2]
        policy = make_policy(name, seed=env.seed if episode is not None and env.seed is not None else 0)
        seat_drivers[env] = (episode, name, policy)
        return policy

    @router.post("/sessions/{session_id}/autostep", response_model=AutostepView, tags=["Sessions (REST)"],
                 summary="Play one round with a server-side policy choosing the seat's action",
                 responses=responses(404, 410, 413, 422))
    async def autostep_session(session_id: SessionId, args: Annotated[AutostepArgs | None, Body()] = None
                               ) -> AutostepView:
        name = (args or AutostepArgs()).policy

        def play(env: ServedArenaEnv) -> tuple[dict[str, Any], ArenaObservation, int]:
            action, obs = env.policy_step(driver_for(env, name))
            return action, obs, _step_count(env)

        action, obs, steps = await manager.run(session_id, play)
        view = _view(manager, session_id, obs, steps)
        return AutostepView(**view.__dict__, policy=name, action=action)

    @router.post("/sessions/{session_id}/reset", response_model=SessionView, tags=["Sessions (REST)"],
                 summary="Start a new episode in this session", responses=responses(404, 410, 413, 422))
    async def reset_session(session_id: SessionId, args: Annotated[ResetArgs | None, Body()] = None) -> SessionView:
        reset_args = (args or ResetArgs()).model_dump(exclude_none=True)
        obs, steps = await manager.run(session_id, lambda env: (env.reset(**reset_args), 0))
        return _view(manager, session_id, obs, steps)

    @router.get("/sessions/{session_id}/state", response_model=ArenaState, tags=["Sessions (REST)"],
                summary="Episode state (public; every lab's private values only with the god_view setting)",
                responses=responses(404, 410, 422))
    async def session_state(session_id: SessionId) -> ArenaState:
        return await manager.run(session_id, lambda env: env.state)

    @router.delete("/sessions/{session_id}", response_model=Closed, tags=["Sessions (REST)"],
                   summary="Close a session", responses=responses(404, 410, 422))
    async def delete_session(session_id: SessionId) -> Closed:
        await manager.close(session_id)
        return Closed(session_id=session_id)

    @router.get("/episodes/{replay_id}", tags=["Episodes"], summary="A finished episode's replay record",
                responses=responses(404, 422))
    async def get_episode(replay_id: ReplayId) -> dict[str, Any]:
        if SERVED_REF.match(replay_id):
            record = recorder.load(replay_id) if recorder is not None else None
        else:  # an evaluation episode whose replay was kept (gpu_arena.server.episodes)
            record = load_episode(manager.settings, recorder, replay_id)
        if record is None:
            raise EpisodeNotFound(f"no stored episode {replay_id!r}")
        return record

    return router
