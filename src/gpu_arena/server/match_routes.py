"""The live-match API (``/api/matches``): seats of one episode held by several clients at once.

Create a match naming what fills each seat (``remote``, or a policy the server runs); each remote
seat gets a bearer token. A seat reads its own observation and sends one action per round; the
round resolves when every remote seat has acted or ``round_timeout_s`` has passed.

The same seat over one WebSocket (``/api/matches/{id}/seats/{seat}/ws``), for clients that prefer
a stream: the first frame is ``{"type": "auth", "token": ...}``; the server answers with the seat
(``{"type": "seat", "data": ...}``, the body of ``GET .../seats/{seat}``) and pushes it again each
time a round resolves. ``{"type": "act", "data": <ArenaAction>}`` answers ``{"type": "accepted"}``,
``{"type": "state"}`` the seat again; a refused frame answers ``{"type": "error", "data": {code,
message}}`` (a failed auth also closes the socket, with 4401 or 4403).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Path, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..core.types import SPLITS, TASKS
from ..models import ArenaAction, ArenaObservation, read_action
from ..policies import DEFAULT_OPPONENTS, policy_families, policy_names
from .environment import MAX_NAME
from .errors import ArenaRequestError, responses
from .matches import REMOTE, Match, MatchManager, MissingToken

MatchId = Annotated[str, Path(min_length=1, max_length=64, description="the id POST /api/matches returned")]
SeatId = Annotated[str, Path(min_length=1, max_length=32, description="a lab id of the match: lab_0, lab_1, ...")]
Authorization = Annotated[str | None, Header(description="Bearer <the seat's token>")]
MAX_SEATS = 8


def seat_kinds() -> list[str]:
    """What may fill a seat: ``remote``, ``archetypes`` (the world's own), any registered policy,
    or a name of a registered family (``llm:...``)."""
    return [REMOTE, DEFAULT_OPPONENTS, *policy_names()]


class MatchArgs(BaseModel):
    """A new match: its world, what fills each seat (seats not named play the world's archetypes)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    task: Literal["single_trade", "market_round", "coalition_market"] = "market_round"
    split: Literal["train", "holdout"] = "train"
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1, description="default: drawn at random")
    seats: dict[Annotated[str, Field(max_length=32)], Annotated[str, Field(max_length=MAX_NAME)]] = Field(
        default_factory=dict, max_length=MAX_SEATS,
        description="seat -> 'remote' (a client holds it), 'archetypes', a policy name, or llm:...")
    round_timeout_s: float = Field(default=30.0, gt=0.0, le=3600.0,
                                   description="a round resolves this long after it started, late seats waiting")
    judge_mode: Literal["none", "rule"] = "none"

    @field_validator("seats")
    @classmethod
    def _known_kinds(cls, v: dict[str, str]) -> dict[str, str]:
        known = seat_kinds()
        families = tuple(f"{f}:" for f in policy_families())
        for seat, kind in v.items():
            if kind not in known and not kind.startswith(families):
                raise ValueError(f"seat {seat}: unknown kind {kind[:MAX_NAME]!r}; "
                                 f"known: {', '.join(known)}, or {', '.join(families) or 'no'} families")
        return v


assert set(TASKS) == {"single_trade", "market_round", "coalition_market"} and set(SPLITS) == {"train", "holdout"}


class MatchCreated(BaseModel):
    match_id: str
    tokens: dict[str, str] = Field(description="remote seat -> its bearer token (shown once)")
    seats: dict[str, str] = Field(description="seat -> what fills it")
    round_timeout_s: float


class MatchState(BaseModel):
    """The public state of a match: nobody's view, nobody's token."""

    match_id: str
    task: str
    split: str
    seed: int
    round: int
    max_rounds: int
    done: bool
    seats: dict[str, str]
    acted: list[str] = Field(description="remote seats that have acted this round")
    waiting_for: list[str] = Field(description="remote seats the round still waits for")
    deadline_in_s: float | None = Field(description="seconds until the round resolves without the late seats")
    replay_id: str | None = Field(default=None, description="once done: GET /api/episodes/{replay_id}")


class SeatState(BaseModel):
    """One seat's own view of the match (needs that seat's token)."""

    match_id: str
    seat: str
    round: int
    done: bool
    acted: bool = Field(description="this seat has sent its action for this round")
    waiting_for: list[str]
    deadline_in_s: float | None
    notice: str | None = Field(default=None, description="set when the last round resolved without this seat")
    observation: ArenaObservation
    replay_id: str | None = None


class Accepted(BaseModel):
    match_id: str
    seat: str
    round: int = Field(description="the round the action was taken for")
    resolved: bool = Field(description="this action was the last one awaited: the round is played")
    waiting_for: list[str]


class MatchesSummary(BaseModel):
    active_matches: int
    max_sessions: int = Field(description="the cap REST sessions and matches share")
    idle_timeout_s: float


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise MissingToken("the Authorization header must read 'Bearer <token>'")
    return token.strip()


def build_match_router(matches: MatchManager) -> APIRouter:
    router = APIRouter(prefix="/api/matches", tags=["Matches"])

    def deadline_in(match: Match) -> float | None:
        return None if match.done else max(0.0, match.deadline - matches.now())

    @router.post("", status_code=201, response_model=MatchCreated, summary="Start a live match",
                 responses=responses(413, 422, 429))
    async def create_match(args: Annotated[MatchArgs | None, Body()] = None) -> MatchCreated:
        a = args or MatchArgs()
        seed = a.seed if a.seed is not None else secrets.randbelow(2**31)
        match = matches.create(a.task, a.split, seed, a.seats, a.round_timeout_s, a.judge_mode)
        return MatchCreated(match_id=match.match_id, tokens=dict(match.tokens), seats=dict(match.kinds),
                            round_timeout_s=match.round_timeout_s)

    @router.get("", response_model=MatchesSummary, summary="Open matches")
    async def matches_summary() -> MatchesSummary:
        return MatchesSummary(active_matches=matches.active, max_sessions=matches.settings.max_sessions,
                              idle_timeout_s=matches.settings.idle_timeout_s)

    @router.get("/{match_id}", response_model=MatchState, summary="A match's public state",
                responses=responses(404, 410, 422))
    async def match_state(match_id: MatchId) -> MatchState:
        m = await matches.get(match_id)
        w = m.episode.world
        waiting = m.waiting_for()
        return MatchState(match_id=m.match_id, task=w.task, split=w.split, seed=w.seed, round=w.round_index,
                          max_rounds=w.max_rounds, done=m.done, seats=dict(m.kinds),
                          acted=[s for s in m.remote if s in m.pending], waiting_for=waiting,
                          deadline_in_s=deadline_in(m), replay_id=m.replay_id)

    async def accept(m: Match, seat: str, action: ArenaAction) -> Accepted:
        taken_for, resolved = await matches.act(m, seat, read_action(action))
        return Accepted(match_id=m.match_id, seat=seat, round=taken_for, resolved=resolved,
                        waiting_for=m.waiting_for())

    def seat_state(m: Match, seat: str) -> SeatState:
        return SeatState(match_id=m.match_id, seat=seat, round=m.round_index, done=m.done, acted=seat in m.pending,
                         waiting_for=m.waiting_for(), deadline_in_s=deadline_in(m), notice=m.notice(seat),
                         observation=m.observation(seat), replay_id=m.replay_id)

    @router.get("/{match_id}/seats/{seat}", response_model=SeatState, summary="A seat's own observation",
                responses=responses(401, 403, 404, 410, 422))
    async def get_seat(match_id: MatchId, seat: SeatId, authorization: Authorization = None) -> SeatState:
        m = await matches.get(match_id)
        m.authorize(seat, _bearer(authorization))
        return seat_state(m, seat)

    @router.post("/{match_id}/seats/{seat}/act", status_code=202, response_model=Accepted,
                 summary="Send the seat's action for this round", responses=responses(401, 403, 404, 409, 410, 413, 422))
    async def act(match_id: MatchId, seat: SeatId, action: ArenaAction, authorization: Authorization = None
                  ) -> Accepted:
        m = await matches.get(match_id)
        m.authorize(seat, _bearer(authorization))
        return await accept(m, seat, action)

    @router.websocket("/{match_id}/seats/{seat}/ws")
    async def seat_socket(websocket: WebSocket, match_id: str, seat: str) -> None:
        await websocket.accept()
        lock = asyncio.Lock()

        async def send(kind: str, data: Any) -> None:
            async with lock:
                await websocket.send_json({"type": kind, "data": data})

        async def refuse(e: ArenaRequestError) -> None:
            await send("error", {"code": e.code, "message": e.message})

        async def receive() -> Any:
            """The next frame as JSON; a frame that is not JSON text answers an error frame and is skipped."""
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    raise WebSocketDisconnect(message.get("code", 1000))
                text = message.get("text")
                if text is None and message.get("bytes") is not None:
                    text = message["bytes"].decode("utf-8", errors="replace")
                try:
                    return json.loads(text or "")
                except ValueError:
                    await refuse(ArenaRequestError("a frame must be a JSON object", code="invalid_json", status=400))

        try:
            first = await receive()
            token = first.get("token") if isinstance(first, dict) and first.get("type") == "auth" else None
            try:
                m = await matches.get(match_id[:64])
                m.authorize(seat[:32], token if isinstance(token, str) else None)
            except ArenaRequestError as e:
                await refuse(e)
                await websocket.close(code=4000 + e.status)
                return
            await send("seat", seat_state(m, seat).model_dump(mode="json"))

            async def push() -> None:  # the seat again after every resolved round, until the end
                while not m.done:
                    await m.changed.wait()
                    async with m.lock:  # never in the middle of a round that resolves in a thread
                        state = seat_state(m, seat).model_dump(mode="json")
                    await send("seat", state)

            pusher = asyncio.create_task(push())
            try:
                while True:
                    frame = await receive()
                    kind = frame.get("type") if isinstance(frame, dict) else None
                    try:
                        m = await matches.get(match_id)
                        if kind == "act":
                            try:
                                action = ArenaAction.model_validate(frame.get("data"))
                            except ValidationError as e:
                                first_error = e.errors()[0]
                                where = ".".join(str(p) for p in first_error.get("loc", ())) or "data"
                                raise ArenaRequestError(f"{where}: {first_error.get('msg', 'invalid')}",
                                                        code="invalid_request", status=422) from e
                            await send("accepted", (await accept(m, seat, action)).model_dump(mode="json"))
                        elif kind == "state":
                            await send("seat", seat_state(m, seat).model_dump(mode="json"))
                        elif kind == "close":
                            break
                        else:
                            raise ArenaRequestError("frames are auth, act, state or close", code="unknown_frame",
                                                    status=422)
                    except ArenaRequestError as e:
                        await refuse(e)
            finally:
                pusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pusher
            await websocket.close()
        except WebSocketDisconnect:
            return

    return router
