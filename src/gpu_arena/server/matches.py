"""Live matches: one episode whose seats are held by several remote clients and server-side policies.

A :class:`Match` holds a core episode, one bearer token per remote seat, and the actions the
remote seats sent for the current round. A round resolves when every remote seat has acted or
the round's deadline has passed: the policy seats then act on their own views, the late remote
seats wait, and the engine steps every seat at once. :class:`MatchManager` keeps the server's
matches (their count shares the REST sessions' cap), resolves overdue rounds (a ticker, and any
request that reads a match), expires idle matches and stores each finished one as a replay.

A round is resolved whole or not at all, under the match's lock, which every request takes before
it reads or changes the match: no request sees half a round. Rounds resolve on the server's event
loop, but for a match with a model in a seat (``llm:...``), whose calls may take seconds, in a
worker thread, so the other sessions and matches go on meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.engine import Episode
from ..core.policy import Policy, policy_move
from ..core.types import Action, RejectedAction
from ..models import ArenaObservation, observation_from_view
from ..native.report import EVERY_SEAT_DRIVEN, PYTHON, EngineReport
from ..policies import DEFAULT_OPPONENTS, make_seat_policy
from .environment import REPLAY_FORMAT
from .errors import ArenaRequestError, CapacityReached
from .recorder import EpisodeRecorder
from .settings import ServerSettings

REMOTE = "remote"
# a match drives every seat from outside (remote clients, server-side policies): the Python core plays it
MATCH_ENGINE = EngineReport(PYTHON, EVERY_SEAT_DRIVEN)
log = logging.getLogger("gpu_arena.server")


class MatchNotFound(ArenaRequestError):
    status = 404
    code = "match_not_found"


class MatchGone(ArenaRequestError):
    status = 410
    code = "match_expired"


class SeatNotFound(ArenaRequestError):
    status = 404
    code = "unknown_seat"


class MissingToken(ArenaRequestError):
    status = 401
    code = "missing_token"


class WrongToken(ArenaRequestError):
    status = 403
    code = "wrong_token"


class MatchConflict(ArenaRequestError):
    """A second action in one round (``already_acted``) or an action after the end (``episode_done``)."""

    status = 409
    code = "already_acted"


@dataclass(eq=False)
class Match:
    """One live match. Its methods take ``now`` (monotonic seconds) so the deadline logic is testable."""

    match_id: str
    episode: Episode
    kinds: dict[str, str]  # seat -> "remote" or the policy name playing it
    tokens: dict[str, str]  # remote seat -> its bearer token
    policies: dict[str, Policy]
    round_timeout_s: float
    deadline: float
    last_activity: float
    pending: dict[str, Action | RejectedAction] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # set at each resolved round (pushes)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # held while a round is submitted or resolved
    threaded: bool = False  # a seat is a policy family (llm:...): its rounds resolve in a worker thread
    missed: dict[str, int] = field(default_factory=dict)  # remote seat -> last round it missed
    replay_id: str | None = None
    recorded: bool = False  # stored (or tried once: a failing store is not retried every tick)
    created_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    @property
    def remote(self) -> list[str]:
        return [s for s, k in self.kinds.items() if k == REMOTE]

    @property
    def done(self) -> bool:
        return self.episode.done

    @property
    def round_index(self) -> int:
        return self.episode.world.round_index

    def waiting_for(self) -> list[str]:
        return [] if self.done else [s for s in self.remote if s not in self.pending]

    def due(self, now: float) -> bool:
        return not self.done and (not self.waiting_for() or now >= self.deadline)

    def authorize(self, seat: str, token: str | None) -> None:
        """The seat exists, is remote, and ``token`` is its own (constant-time comparison)."""
        if seat not in self.kinds:
            raise SeatNotFound(f"match {self.match_id} has no seat {seat[:32]!r}; seats: {', '.join(self.kinds)}")
        if not token:
            raise MissingToken("send the seat's token as 'Authorization: Bearer <token>'")
        own = self.tokens.get(seat)
        if own is None or not secrets.compare_digest(own.encode(), token.encode()):
            raise WrongToken(f"that token does not hold seat {seat}")

    def submit(self, seat: str, action: Action | RejectedAction) -> None:
        if self.done:
            raise MatchConflict(f"match {self.match_id} is over", code="episode_done")
        if seat in self.pending:
            raise MatchConflict(f"{seat} already acted in round {self.round_index}")
        self.pending[seat] = action

    def resolve(self, now: float) -> None:
        """Play the round: the remote seats' actions (late ones wait), then each policy seat's on
        its own view, all resolved at once by the engine."""
        episode = self.episode
        actions: dict[str, Action | RejectedAction | None] = dict(self.pending)
        for seat in self.remote:
            if seat not in self.pending:
                self.missed[seat] = self.round_index
        for seat, policy in self.policies.items():
            actions[seat] = policy_move(policy, episode, seat)
        episode.step(actions)
        self.pending = {}
        self.deadline = now + self.round_timeout_s

    def observation(self, seat: str) -> ArenaObservation:
        """The seat's wire observation; its metadata names the match and the engine playing it
        (``engine``: the Python core, every seat driven from outside), and, when the last round went
        on without this seat, says so (``notice``)."""
        notice = self.notice(seat)
        view = self.episode.observe(seat)
        return observation_from_view(view, metadata={"match_id": self.match_id, "seat": seat, "engine": MATCH_ENGINE.to_dict(),
                                                     **({"notice": notice} if notice else {}),
                                                     **({"replay_id": self.replay_id} if self.replay_id else {})})

    def notice(self, seat: str) -> str | None:
        missed = self.missed.get(seat)
        if missed is None or missed != self.round_index - 1:
            return None
        return (f"round {missed} resolved without your action after {self.round_timeout_s:g} s: "
                f"your seat waited")

    def replay_record(self) -> dict[str, Any]:
        """The finished match as a replay record: every seat's actions are in the transcript; the
        record's ``seat`` is the first remote seat, the others are named in ``seats``."""
        world = self.episode.world
        seat = self.remote[0]
        return {
            "format": REPLAY_FORMAT, "episode_id": self.match_id, "match_id": self.match_id, "task": world.task,
            "split": world.split, "seed": world.seed, "seat": seat, "judge_mode": world.judge_mode,
            # the other seats, as a replay resets them: a remote seat's moves come from the transcript
            "opponents": {s: ("wait" if k == REMOTE else k) for s, k in self.kinds.items() if s != seat},
            "seats": dict(self.kinds), "policy": REMOTE, "episode_return": self.episode.returns[seat],
            "returns": dict(self.episode.returns), "created_at": self.created_at,
            "transcript": self.episode.transcript,
        }


class MatchManager:
    """The live matches of one server.

    Contract:

    * ``create`` starts a match, or raises :class:`CapacityReached` when the server's open REST
      sessions and matches together reach ``max_sessions``.
    * ``await get(match_id)`` resolves the match's round first if it is due; an unknown id raises
      :class:`MatchNotFound`, an expired one :class:`MatchGone`.
    * A match with no request for ``idle_timeout_s`` expires; a finished match is stored once as a
      replay (``replay_id``) and stays readable until it expires (at most ``tombstones`` finished
      matches are kept, the oldest dropped first); only unfinished matches hold a slot of the cap.
    """

    def __init__(self, settings: ServerSettings, recorder: EpisodeRecorder | None,
                 others: Callable[[], int] = lambda: 0, clock: Callable[[], float] = time.monotonic,
                 tick_s: float = 0.05) -> None:
        self.settings = settings
        self._recorder = recorder
        self._others = others  # open REST sessions: they share the cap
        self._clock = clock
        self._tick_s = tick_s
        self._matches: dict[str, Match] = {}
        self._gone: OrderedDict[str, str] = OrderedDict()
        self._ticker: asyncio.Task[None] | None = None

    @property
    def active(self) -> int:
        """Matches still being played: they hold a slot of the cap (a finished one is only read)."""
        return sum(1 for m in self._matches.values() if not m.done)

    def now(self) -> float:
        return self._clock()

    def create(self, task: str, split: str, seed: int, seats: Mapping[str, str], round_timeout_s: float,
               judge_mode: str = "none") -> Match:
        self.expire_idle()
        used = self.active + self._others()
        if used >= self.settings.max_sessions:
            raise CapacityReached(
                f"{used} of {self.settings.max_sessions} sessions and matches are open; retry later",
                extra={"active_matches": self.active, "max_sessions": self.settings.max_sessions})
        episode = Episode.new(task, split, seed, controlled=(), judge_mode=judge_mode)
        labs = list(episode.world.labs)
        unknown = [s for s in seats if s not in labs]
        if unknown:
            raise SeatNotFound(f"{task} seed {seed} has no seat {', '.join(sorted(unknown))}; seats: {', '.join(labs)}",
                               status=422)
        kinds = {lab: seats.get(lab, DEFAULT_OPPONENTS) for lab in labs}
        if REMOTE not in kinds.values():
            raise ArenaRequestError("a match needs at least one remote seat", code="no_remote_seat", status=422)
        refused = sorted(lab for lab, kind in kinds.items() if ":" in kind)
        if refused and not self.settings.model_seats:
            # a family names an endpoint or a checkpoint: the server calls out or loads it only where
            # its operator allows it, as for the judge (sessions never take them)
            raise ArenaRequestError(f"seat {', '.join(refused)}: this server does not run models named by clients "
                                    f"(GPU_ARENA_MODEL_SEATS=1 allows it)", code="policy_not_allowed", status=422)
        policies = {}
        for lab, kind in kinds.items():
            if kind != REMOTE:
                try:
                    policies[lab] = make_seat_policy(episode.world, lab, kind)
                except (KeyError, ValueError) as e:
                    raise ArenaRequestError(f"seat {lab}: {e}", code="unknown_policy", status=422) from e
        # every remote seat finishing ends the match early, as a session's seat does
        episode.controlled = tuple(lab for lab, kind in kinds.items() if kind == REMOTE)
        now = self._clock()
        match = Match(uuid.uuid4().hex, episode, kinds, {lab: secrets.token_urlsafe(24) for lab in episode.controlled},
                      policies, round_timeout_s, now + round_timeout_s, now,
                      threaded=any(":" in kind for kind in kinds.values()))
        self._matches[match.match_id] = match
        return match

    async def get(self, match_id: str) -> Match:
        match = self._matches.get(match_id)
        now = self._clock()
        if match is not None and match.last_activity < now - self.settings.idle_timeout_s:
            self._bury(match_id)  # idle past its time: expired by this request, as by the ticker
            match = None
        if match is None:
            if match_id not in self._gone:
                raise MatchNotFound(f"no match {match_id[:64]!r}")
            raise MatchGone(f"match {match_id[:64]!r} expired after {self.settings.idle_timeout_s:g} s idle")
        match.last_activity = now
        await self.advance(match)
        return match

    async def act(self, match: Match, seat: str, action: Action | RejectedAction) -> tuple[int, bool]:
        """Take a remote seat's action and resolve the round if it was the last one awaited: the
        round the action was taken for (read under the lock: a round may resolve while the call
        waits for it) and whether that round is played now."""
        async with match.lock:
            taken_for = match.round_index
            match.submit(seat, action)
        await self.advance(match)
        return taken_for, match.round_index != taken_for

    async def advance(self, match: Match) -> None:
        """Resolve the match's round if it is due, and store the match once it is over. A match with
        a model in a seat (``threaded``) resolves in a worker thread, so a slow endpoint or
        checkpoint holds up that match only; every reader of a match waits on its lock first, so
        none sees half a round."""
        async with match.lock:
            now = self._clock()
            if match.due(now):
                if match.threaded:
                    await asyncio.to_thread(match.resolve, now)
                else:
                    match.resolve(now)
                # wake whoever waits for this round (WebSocket seats), then arm the event for the next one
                match.changed.set()
                match.changed = asyncio.Event()
            if match.done and not match.recorded:
                match.recorded = True
                match.replay_id = self._store(match)
                self._prune_finished()

    def _store(self, match: Match) -> str | None:
        replay_id = uuid.uuid4().hex
        if self._recorder is None:
            return replay_id  # nothing stored, but the match is marked as recorded
        try:
            self._recorder.save({"replay_id": replay_id, **match.replay_record()})
        except Exception:  # the store failing must not take the match's last round with it
            log.exception("could not store match %s", match.match_id)
            return None
        return replay_id

    def _prune_finished(self) -> None:
        """Keep at most ``tombstones`` finished matches readable (the oldest go first)."""
        finished = [m.match_id for m in self._matches.values() if m.done]
        for match_id in finished[:max(0, len(finished) - self.settings.tombstones)]:
            self._bury(match_id)

    def expire_idle(self) -> None:
        cutoff = self._clock() - self.settings.idle_timeout_s
        for match_id in [m.match_id for m in self._matches.values() if m.last_activity < cutoff]:
            self._bury(match_id)

    def _bury(self, match_id: str) -> None:
        self._matches.pop(match_id, None)
        self._gone[match_id] = "match_expired"
        while len(self._gone) > self.settings.tombstones:
            self._gone.popitem(last=False)

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(self._tick_s)
            for match in list(self._matches.values()):
                await self.advance(match)
            self.expire_idle()

    def start(self) -> None:
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick_forever())

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        self._matches.clear()
