"""The environment as the server runs it: typed reset arguments, a public ``state``, the OpenEnv
task API, finished episodes recorded as replays, and a hard stop once a session is closed."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core.judge import recorded_judge
from ..core.policy import Policy
from ..core.records import action_from_record, action_record
from ..core.rules import JUDGE_MODES
from ..core.tasks import task_params
from ..core.types import MAX_SEED, SPLITS, TASKS, Action, RejectedAction
from ..core.views import ResultView
from ..env import GpuArenaEnv
from ..models import ArenaObservation, ArenaState
from ..native.episode import NativeEpisode
from ..policies import DEFAULT_OPPONENTS, OpponentsSpec, policy_names
from .errors import InvalidResetArguments, ReplayMismatch, SessionExpiredError, UnknownSplit
from .recorder import EpisodeRecorder
from .settings import ServerSettings

log = logging.getLogger("gpu_arena.server")

TaskName = Literal["single_trade", "market_round", "coalition_market"]
SplitName = Literal["train", "holdout"]
JudgeMode = Literal["none", "rule"]
# the wire literals spell out the core's names so that OpenAPI lists them; they must not drift apart
assert (get_args(TaskName), get_args(SplitName), get_args(JudgeMode)) == (TASKS, SPLITS, JUDGE_MODES)

MAX_NAME = 32
MAX_SEATS = 8
REPLAY_FORMAT = "gpu_arena.replay/1"


class ResetArgs(BaseModel):
    """Arguments of ``reset`` on the server (WebSocket ``reset`` data, ``POST /reset``, ``POST /api/sessions``).

    Every field is bounded so that no reset can allocate without limit; an unknown field, task,
    split, judge mode or policy name is a 422 (HTTP) or an error frame (WebSocket), never a crash.
    ``index`` picks a task by its position in the OpenEnv task API (``/gpu_arena/tasks``), as an
    alternative to ``task``.
    """

    model_config = ConfigDict(extra="forbid")

    task: TaskName | None = Field(default=None, description="single_trade (default) | market_round | coalition_market")
    index: int | None = Field(default=None, ge=0, lt=len(TASKS), strict=True,
                              description="task index in the task API (alternative to task)")
    split: SplitName = "train"
    seed: int | None = Field(default=None, ge=0, le=MAX_SEED, strict=True,
                             description="world seed; omitted: a fresh one, reported in observation.metadata.seed")
    seat: str = Field(default="lab_0", pattern=r"^lab_[0-9]{1,2}$", description="the lab this session controls")
    opponents: str | list[str] | dict[str, str] | None = Field(
        default=None, description="a policy for every other seat, a list in seat order, or seat -> policy; "
                                  "default: each seat plays its world's archetype")
    judge_mode: JudgeMode = "none"
    episode_id: str | None = Field(default=None, min_length=1, max_length=128)

    @field_validator("opponents")
    @classmethod
    def _known_policies(cls, v: str | list[str] | dict[str, str] | None) -> str | list[str] | dict[str, str] | None:
        if v is None:
            return v
        if not isinstance(v, str) and not 0 < len(v) <= MAX_SEATS:
            raise ValueError(f"opponents must name 1 to {MAX_SEATS} seats")
        spec = OpponentsSpec.parse(v)  # an OpponentsError is a ValueError: a 422
        known = {DEFAULT_OPPONENTS, *policy_names()}
        # on the wire a string is one registered name as typed (the command line's text forms are not)
        for name in (v,) if isinstance(v, str) and spec.one != v else spec.names:
            if len(name) > MAX_NAME or name not in known:
                raise ValueError(f"unknown policy {name[:MAX_NAME]!r}; known: {', '.join(sorted(known))}")
        return v

    @model_validator(mode="after")
    def _task_or_index(self) -> ResetArgs:
        if self.index is not None:
            by_index = TASKS[self.index]
            if self.task is not None and self.task != by_index:
                raise ValueError(f"task {self.task!r} and index {self.index} ({by_index!r}) disagree")
            self.task = by_index  # type: ignore[assignment]
        return self

    def env_kwargs(self) -> dict[str, Any]:
        return {"seed": self.seed, "episode_id": self.episode_id, "task": self.task or TASKS[0], "split": self.split,
                "seat": self.seat, "opponents": self.opponents, "judge_mode": self.judge_mode}


def parse_reset_args(raw: dict[str, Any]) -> ResetArgs:
    """Validate reset arguments, turning every failure into :class:`InvalidResetArguments`."""
    try:
        return ResetArgs.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "reset"
        raise InvalidResetArguments(f"{where}: {first.get('msg', 'invalid')}") from None


def task_spec(split: str, index: int) -> dict[str, Any]:
    task = TASKS[index]
    p = task_params(task, split)
    return {"id": f"{split}/{task}", "index": index, "task": task, "split": split,
            "labs": list(p.n_labs), "rounds": list(p.rounds), "shocks": list(p.n_shocks),
            "reset": {"task": task, "split": split}}


class ServedArenaEnv(GpuArenaEnv):
    """:class:`GpuArenaEnv` as one server session runs it.

    Contract, beyond the in-process environment's:

    * ``reset`` validates its arguments with :class:`ResetArgs` and raises
      :class:`InvalidResetArguments` (a ``ValueError``) before touching the current episode.
    * ``state`` is public (ids, task, round, done; no ``world``) unless the server's ``god_view``
      setting is on.
    * When an episode ends, its replay record is written to the store once and its id is put in
      the last observation's ``metadata["replay_id"]``.
    * After ``close`` (a DELETE, the idle reaper, a closed socket) the episode is dropped: ``step``
      answers a ``session_expired`` error observation and ``reset`` and ``state`` raise, so
      nothing ever talks to a stale episode. A call that comes ``idle_timeout_s`` or more after
      the previous one closes the session itself, whether or not a reaper got there first
      (OpenEnv's reaper sweeps only every few seconds).
    * The OpenEnv task API lists, per split (``train``, ``holdout``), the three tasks.
    """

    def __init__(self, settings: ServerSettings | None = None, recorder: EpisodeRecorder | None = None) -> None:
        super().__init__()
        self._settings = settings or ServerSettings()
        self._recorder = recorder
        self._args: ResetArgs | None = None
        self._recorded = False
        self._closed = False
        self._fork_origin: dict[str, Any] | None = None  # set by replay_rounds: where this episode was forked
        self._last_call = time.monotonic()
        # OpenEnv closes sessions from a worker thread while the event loop may be stepping them
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ OpenEnv API

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ArenaObservation:
        with self._lock:
            if self._expired():
                raise SessionExpiredError("this session was closed; open a new one")
            raw = {k: v for k, v in {"seed": seed, "episode_id": episode_id, **kwargs}.items() if v is not None}
            args = parse_reset_args(raw)
            env_kwargs = args.env_kwargs()
            if args.judge_mode == "rule" and self._settings.judge not in (None, "rule"):
                env_kwargs["judge"] = self._settings.judge  # the operator's model judge (server settings)
            try:
                obs = super().reset(**env_kwargs)
            except ValueError as e:  # a seat this world does not have, an opponent list of the wrong length
                raise InvalidResetArguments(str(e)) from None
            self._args, self._recorded, self._fork_origin = args, False, None
            return obs

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> ArenaObservation:
        with self._lock:
            if self._expired():
                return ArenaObservation(
                    last_action_result=ResultView(False, "session_expired", "this session was closed; open a new one"),
                    reward=0.0, done=True)
            obs = super().step(action)
            episode = self.episode
            if obs.done and episode is not None and episode.done and not self._recorded:
                self._recorded = True
                replay_id = self._record()
                if replay_id is not None:
                    obs.metadata = {**obs.metadata, "replay_id": replay_id}
            return obs

    @property
    def state(self) -> ArenaState:
        with self._lock:
            if self._expired():
                raise SessionExpiredError("this session was closed; open a new one")
            if self._settings.god_view:
                return super().state
            ep = self.episode
            if ep is None:
                return ArenaState(episode_id=self._episode_id, step_count=0)
            # the public part only, from the seat's view (built once a round, shared): neither the
            # world's serialisation (a millisecond) nor a copy of it, and a Rust episode stays in Rust
            v = ep.observe(self._seat)
            return ArenaState(episode_id=self._episode_id, step_count=self._step_count, task=v.task, split=v.split,
                              seed=self._seed, controlled_lab_id=self._seat, round_index=v.round_index,
                              max_rounds=v.max_rounds, done=ep.done, engine=self._engine_dict())

    def close(self) -> None:
        # drop the episode so that nothing holding this object can keep playing it
        with self._lock:
            self._closed = True
            self._episode = None
            self._policies = {}

    @property
    def closed(self) -> bool:
        return self._closed

    def _expired(self) -> bool:
        now = time.monotonic()
        if now - self._last_call >= self._settings.idle_timeout_s:
            self.close()
        self._last_call = now
        return self._closed

    def observe_current(self) -> ArenaObservation:
        """The seat's current view without stepping (``GET /api/sessions/{id}``)."""
        with self._lock:
            if self._expired():
                raise SessionExpiredError("this session was closed")
            if self.episode is None:
                return ArenaObservation(last_action_result=ResultView(False, "not_reset", "call reset first"),
                                        reward=0.0, done=True)
            return self._observe()

    def policy_step(self, policy: Policy) -> tuple[dict[str, Any], ArenaObservation]:
        """Let ``policy`` choose the seat's action from the seat's own view, then step with it.

        Returns the action as sent (a wire dict, or ``{"rejected": code, ...}`` when the policy
        failed or refused its own output) and the new observation. The policy sees exactly what a
        remote client would, so a server-side policy has no advantage over a remote one (the oracle
        excepted: it is bound to the world by design).
        """
        with self._lock:
            if self._expired():
                raise SessionExpiredError("this session was closed; open a new one")
            episode = self.episode
            if episode is None or episode.done:
                obs = self.step({"action_type": "wait"})  # the parent answers a finished or missing episode
                return {}, obs
            action = self._policy_action(episode, self._seat, policy)
            return action_dict(action), self.step(action)

    def replay_rounds(self, record: Mapping[str, Any], rounds: int, origin: dict[str, Any] | None = None
                      ) -> ArenaObservation:
        """Reset to ``record``'s world and play its first ``rounds`` rounds again: a fork of a stored
        episode, which this session then plays on from there.

        Every seat gets its recorded action, and each opponent's policy is still asked for its own
        (and its answer dropped), so that a policy with state (an RNG, a memory) stands where it
        stood at that point of the original. A model judge's recorded verdicts are played back for
        those rounds (the model is not asked again). The replayed rounds must equal the record's
        transcript, else :class:`ReplayMismatch` (an episode recorded by other code); a record whose
        reset arguments this server refuses raises :class:`InvalidResetArguments`.
        """
        with self._lock:
            transcript = list(record["transcript"])[:rounds]
            self.reset(seed=int(record["seed"]), task=record["task"], split=record["split"],
                       seat=record.get("seat") or "lab_0", judge_mode=record.get("judge_mode") or "none",
                       opponents=record.get("opponents") or None)
            episode = self.episode
            assert episode is not None
            if isinstance(episode, NativeEpisode):  # a replay steps every seat's recorded move, in Python
                episode = self._to_python(episode)
            live_judge = getattr(episode, "judge", None)
            # None: the rule judge decided alone in those rounds, whatever judge this server has now
            episode.judge = recorded_judge(transcript)
            try:
                for i, rnd in enumerate(transcript):
                    if episode.done:
                        raise ReplayMismatch(f"the replayed episode ended before round {i}")
                    for lid, policy in self._policies.items():
                        self._policy_action(episode, lid, policy)  # its state moves on; the record decides
                    episode.step({lid: action_from_record(a) for lid, a in rnd["actions"].items()})
                    self._step_count += 1
                    if _plain(episode.transcript[-1]) != _plain(rnd):
                        raise ReplayMismatch(f"round {i} replays differently from the record")
            finally:
                episode.judge = live_judge
            self._fork_origin = origin
            return self._observe()

    # OpenEnv awaits these on its event loop when an environment overrides them (otherwise it hops
    # to a per-session thread for every call). A step is ~1 ms of GIL-bound Python: a thread
    # cannot run it in parallel, and 16+ threads contending with the loop for the GIL cost more
    # than the step itself (decision 0008 has the numbers).
    async def reset_async(self, seed: int | None = None, episode_id: str | None = None,
                          **kwargs: Any) -> ArenaObservation:
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> ArenaObservation:
        return self.step(action, timeout_s=timeout_s, **kwargs)

    # ------------------------------------------------------------------ OpenEnv task API

    def list_splits(self) -> list[dict[str, str]]:
        return [{"name": "train", "type": "train"}, {"name": "holdout", "type": "test"}]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        self._check_split(split)
        return [task_spec(split, i) for i in range(len(TASKS))]

    def num_tasks(self, split: str) -> int:
        self._check_split(split)
        return len(TASKS)

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        self._check_split(split)
        if not 0 <= index < len(TASKS):
            raise IndexError(index)  # OpenEnv's task routes answer an IndexError with 400
        return task_spec(split, index)

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, Any]]:
        self._check_split(split)
        return [task_spec(split, i) for i in range(len(TASKS))[start:stop]]

    @staticmethod
    def _check_split(split: str) -> None:
        if split not in SPLITS:
            raise UnknownSplit(f"unknown split {str(split)[:MAX_NAME]!r}; expected one of {', '.join(SPLITS)}")

    # ------------------------------------------------------------------ replays

    def replay_record(self) -> dict[str, Any]:
        """The finished (or running) episode as a replay record (see ``gpu_arena.evaluation.replay``)."""
        episode, args = self.episode, self._args
        assert episode is not None and args is not None
        view = episode.observe(self._seat)  # its task and split (reading the world would move a Rust episode)
        return {
            "format": REPLAY_FORMAT, "episode_id": self._episode_id, "task": view.task, "split": view.split,
            "seed": self._seed, "seat": self._seat, "judge_mode": args.judge_mode,
            "opponents": args.opponents if args.opponents is not None else DEFAULT_OPPONENTS,
            "policy": "remote", "episode_return": episode.returns[self._seat],
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "transcript": episode.transcript,
            **({"forked_from": self._fork_origin} if self._fork_origin else {}),
        }

    def _record(self) -> str | None:
        if self._recorder is None:
            return None
        record = {"replay_id": uuid.uuid4().hex, **self.replay_record()}
        try:
            self._recorder.save(record)
        except Exception:  # the store failing must not take the episode's last step with it
            log.exception("could not store episode %s", record["episode_id"])
            return None
        return str(record["replay_id"])


def _plain(value: Any) -> Any:
    """A transcript entry as JSON gives it back (tuples as lists), for comparison with a stored one."""
    return json.loads(json.dumps(value))


def action_dict(action: Action | RejectedAction) -> dict[str, Any]:
    """A core action as the transcript records it (defaults left out), for display."""
    record = action if isinstance(action, RejectedAction) else action_record(action)
    if isinstance(record, RejectedAction):
        return {"rejected": record.code, "message": record.message}
    return record


__all__ = ["ResetArgs", "ServedArenaEnv", "action_dict", "parse_reset_args", "task_spec"]


def seat_policies() -> list[str]:
    """Policies a server may run in a seat on a visitor's request: the registry's own names.

    Families (``llm:...``) are left out on purpose: they name endpoints or checkpoints, and a page
    must not make the server call out or load models on a click.
    """
    return [n for n in policy_names() if ":" not in n]
