"""GpuArenaEnv: the arena as an OpenEnv ``Environment`` with one controlled seat.

The other seats are filled by policies (``opponents``). Each ``step`` takes the controlled seat's
action, asks every other seat's policy for its action on that seat's own view, resolves the
round in the core engine, and returns the controlled seat's new observation.
"""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ._openenv_contract import Environment, EnvironmentMetadata
from .core.engine import Episode, EpisodeSnapshot
from .core.judge import PitchJudge
from .core.policy import Policy, policy_move
from .core.rules import JUDGE_MODES
from .core.serialize import world_to_dict
from .core.types import REWARD_COLUMNS, SPLITS, TASKS, Action, RejectedAction, World
from .core.views import ResultView, render_text
from .core.worldgen import generate_world
from .models import ArenaAction, ArenaObservation, ArenaState, observation_from_view, read_action
from .native.episode import RUST_SEAT_POLICIES, NativeEpisode, bind_world
from .native.report import (
    ENGINE_PYTHON,
    MODEL_JUDGE,
    NO_RUST,
    PYTHON,
    PYTHON_OPPONENTS,
    REPLAYED,
    RESTORED,
    RUST,
    EngineReport,
    rust_report,
)
from .native.twin import native_engine
from .policies import OpponentsSpec, make_seat_policy

RULE_JUDGE = "rule"
ENGINES = ("auto", "python", "rust")
ENGINE_VARIABLE = "GPU_ARENA_ENGINE"
DEFAULT_ENGINE = "auto"


def check_world_args(task: Any, split: Any, judge_mode: Any) -> None:
    """``ValueError`` naming the first of ``task``, ``split``, ``judge_mode`` that is not a known one."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    if judge_mode not in JUDGE_MODES:
        raise ValueError(f"unknown judge_mode {judge_mode!r}; expected one of {', '.join(JUDGE_MODES)}")


def _error_observation(code: str, message: str, *, done: bool) -> ArenaObservation:
    return ArenaObservation(last_action_result=ResultView(ok=False, code=code, message=message),
                            reward=0.0, done=done)


class GpuArenaEnv(Environment[ArenaAction, ArenaObservation, ArenaState]):
    """A scarce-GPU negotiation market with one seat driven from outside.

    Contract (after Gymnasium's ``Env``):

    * ``reset(seed=None, task=..., split=..., seat=..., opponents=..., judge_mode=..., judge=...)``
      draws a world from ``(task, split, seed)`` and returns the seat's first observation. The same
      arguments and the same actions always give the same transcript. ``seed=None`` draws a fresh
      seed, reported in ``observation.metadata["seed"]``.
    * ``step(action)`` plays one round and returns the seat's observation with ``reward`` (in
      [-1, 1]), ``reward_breakdown`` (all 11 columns) and ``last_action_result`` (ok, code,
      message). An invalid action never raises: it is a wait with an ``invalid_action_penalty``
      and a stable error code, and it changes nothing else; a core ``RejectedAction`` (such as
      ``gpu_arena.llm.FormatError``) is stepped the same way with its own code. ``step`` before
      ``reset`` or after the episode ended returns an error observation (``not_reset`` /
      ``episode_done``) with zero reward and never starts a new episode.
    * Every observation's ``metadata["engine"]`` (and ``state.engine``) says which engine plays
      the episode and, where the Python core does, why (:meth:`engine_report`); ``state`` and
      snapshots, restores and forks of a Rust-played episode leave it in Rust.
    * The sum of an episode's rewards equals (final utility − BATNA) / reward_scale plus the
      penalties, exactly.
    * Observations are values: their nested views are frozen and may be shared. ``state`` is
      the god view (all private values) for orchestration only.

    Args (defaults for ``reset``):
        task: ``single_trade`` | ``market_round`` | ``coalition_market``.
        split: ``train`` | ``holdout``.
        seat: the controlled lab id (``lab_0`` by default).
        opponents: a policy name for every other seat, a list in seat order, or a mapping
            seat -> name or Policy object (or their text forms ``a,b,c`` and ``lab_1=a,lab_2=b``;
            see :class:`~gpu_arena.core.opponents.OpponentsSpec`, which this may be too).
            Default ``archetypes``: each seat plays the archetype (cooperative, selfish,
            deadline_panicked, deceptive, retaliatory) its world assigned, with the world's
            parameters for it.
        judge_mode: ``none`` (auctions go to the best bid) or ``rule`` (judge mode: pitches are
            scored against the server's truth).
        judge: in judge mode, who adds an opinion to the rule judge's truth checks: ``rule`` or
            None (nobody: the rule judge alone), an LLM judge name ``llm:openai:<model>@<base_url>``
            (see ``gpu_arena.llm.judge``), or any ``PitchJudge`` object. Its effect is bounded and
            a failing judge falls back to the rule judge (``gpu_arena.core.judge``). A judge name
            is resolved once per environment, so its ``ledger`` spans episodes (``self.judge``).
        engine: who plays an episode whose other seats all play their world's archetypes (or
            ``random_valid``) and which has no model judge: ``python`` (the core), ``rust`` (the Rust engine of decision
            0026: the same results, faster; an error where it cannot run) or ``auto`` (Rust where
            it can, else Python). Default ``$GPU_ARENA_ENGINE``, else ``auto``. Other episodes,
            and any round whose move Rust cannot hold, are played by the Python core;
            :meth:`engine_report` says which played and why.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, task: str = "single_trade", split: str = "train", seat: str = "lab_0",
                 opponents: str | Sequence[Any] | Mapping[str, Any] | OpponentsSpec | None = None,
                 judge_mode: str = "none", judge: str | PitchJudge | None = None, engine: str | None = None) -> None:
        super().__init__()
        engine = engine if engine is not None else os.environ.get(ENGINE_VARIABLE) or DEFAULT_ENGINE
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
        self.engine = engine
        self._defaults: dict[str, Any] = {"task": task, "split": split, "seat": seat, "opponents": opponents,
                                          "judge_mode": judge_mode, "judge": judge}
        self._judges: dict[str, PitchJudge] = {}  # judge names resolved so far (their ledgers accumulate)
        self.judge: PitchJudge | None = None  # the model judge of the current episode, if any
        self._episode: Episode | NativeEpisode | None = None
        # why the Python core plays self._episode where it is a core Episode (reset, restore, replay)
        self._python_report = EngineReport(PYTHON)
        self._policies: dict[str, Policy] = {}
        self._seat = seat
        self._episode_id: str | None = None
        self._seed: int | None = None
        self._step_count = 0

    # ------------------------------------------------------------------ OpenEnv API

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ArenaObservation:
        args = dict(self._defaults)
        unknown = set(kwargs) - set(args)
        if unknown:
            raise ValueError(f"unknown reset arguments: {', '.join(sorted(unknown))}; known: {', '.join(args)}")
        args.update({k: v for k, v in kwargs.items() if v is not None})
        task, split, seat, judge_mode = args["task"], args["split"], args["seat"], args["judge_mode"]
        check_world_args(task, split, judge_mode)
        judge = self._resolve_judge(args["judge"])
        if judge is not None and judge_mode == "none":
            raise ValueError("a judge scores pitches in judge mode only: pass judge_mode='rule' with judge=...")
        if seed is None:
            seed = secrets.randbelow(2**31)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        if not isinstance(seat, str):
            raise ValueError(f"seat must be a lab id such as 'lab_0', got {seat!r}")
        if episode_id is not None and not isinstance(episode_id, str):
            raise ValueError(f"episode_id must be a string, got {episode_id!r}")
        world = generate_world(task, split, seed, judge_mode)
        if seat not in world.labs:
            raise ValueError(f"unknown seat {seat!r}; {task} seed {seed} has {', '.join(world.labs)}")
        chosen = OpponentsSpec.parse(args["opponents"]).for_seats([lid for lid in world.labs if lid != seat])
        rs = self._native_engine(judge, chosen)
        if isinstance(rs, str):  # the Python core plays it, with these policies
            self._policies = self._build_opponents(world, chosen)
            if self.engine == "rust":
                raise ValueError(f"engine='rust' cannot play this episode: {rs}")
            self._episode = Episode(world, (seat,), judge=judge)
            self._python_report = EngineReport(PYTHON, rs)
        else:  # Rust plays the other seats: no Python policy is built for them
            self._episode, self._policies = NativeEpisode(world, seat, rs, chosen), {}
        self._seat, self._seed = seat, seed
        self.judge = judge
        self._episode_id = episode_id or str(uuid.uuid4())
        self._step_count = 0
        return self._observe()

    def step(self, action: ArenaAction | Action | RejectedAction | Mapping[str, Any] | str,
             timeout_s: float | None = None, **kwargs: Any) -> ArenaObservation:
        episode = self._episode
        if episode is None:
            return _error_observation("not_reset", "call reset() before step()", done=True)
        if episode.done:
            return _error_observation("episode_done", "the episode is over; call reset() for a new one", done=True)
        move = read_action(action)
        if isinstance(episode, NativeEpisode):  # it asks the archetypes itself, in Rust or in Python
            episode.play_seat(self._seat, move)
            self._step_count += 1
            return self._observe()
        actions: dict[str, Action | RejectedAction | None] = {self._seat: move}
        for lid, policy in self._policies.items():
            actions[lid] = self._policy_action(episode, lid, policy)
        episode.step(actions)
        self._step_count += 1
        return self._observe()

    @property
    def state(self) -> ArenaState:
        ep = self._episode
        if ep is None:
            return ArenaState(episode_id=self._episode_id, step_count=0)
        w = ep.world_view() if isinstance(ep, NativeEpisode) else ep.world  # reading it moves nothing
        return ArenaState(episode_id=self._episode_id, step_count=self._step_count, task=w.task, split=w.split,
                          seed=w.seed, controlled_lab_id=self._seat, round_index=w.round_index,
                          max_rounds=w.max_rounds, done=w.done, world=world_to_dict(w),
                          engine=self._engine_dict())

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="gpu_arena",
            description="AI labs bargain, pool and pitch for scarce GPU blocks before a deadline; "
                        "dense potential-based reward with 11 decomposed columns.",
            version="0.1.0",
        )

    # ------------------------------------------------------------------ extras

    @property
    def seat(self) -> str:
        """The controlled seat: the lab whose actions ``step`` takes."""
        return self._seat

    @property
    def episode(self) -> Episode | NativeEpisode | None:
        """The core episode (for harnesses and tests), or its interface over the Rust engine."""
        return self._episode

    @property
    def policies(self) -> dict[str, Policy]:
        """The policies playing the other seats this episode, by seat (a new dict; the same objects;
        where Rust plays them, Python twins in the state they have now)."""
        if isinstance(self._episode, NativeEpisode):
            return self._episode.opponent_policies()
        return dict(self._policies)

    @property
    def seed(self) -> int | None:
        """The world seed of the current episode (None before ``reset``)."""
        return self._seed

    @property
    def engine_playing(self) -> str | None:
        """Who plays the current episode now: ``rust`` (the Rust engine) or ``python`` (the core,
        from the start or since it moved there: :meth:`engine_report` says why); None before
        ``reset``."""
        report = self.engine_report()
        return None if report is None else report.playing

    def engine_report(self) -> EngineReport | None:
        """Which engine plays the current episode, why the Python core does where it does, whether
        it moved there from Rust and how many rounds Rust played (None before ``reset``). The
        reasons are :mod:`gpu_arena.native.report`'s. Observations carry it as ``metadata["engine"]``."""
        episode = self._episode
        if episode is None:
            return None
        if isinstance(episode, NativeEpisode):
            if episode.in_python:
                return EngineReport(PYTHON, episode.moved_reason, True, episode.rust_rounds)
            return rust_report(episode.rust_rounds)
        return self._python_report

    def _engine_dict(self) -> dict[str, Any] | None:
        """:meth:`engine_report` as the wire carries it (every observation's ``metadata["engine"]``)."""
        episode = self._episode
        if isinstance(episode, NativeEpisode) and not episode.in_python:  # the step's path: no report built
            return {"playing": RUST, "reason": None, "moved": False, "rust_rounds": episode.rust_rounds}
        report = self.engine_report()
        return None if report is None else report.to_dict()

    def snapshot(self) -> dict[str, Any]:
        """The environment at the current step, to :meth:`restore` (any number of times). Where
        Rust plays the episode, ``native`` holds a fork of it, which :meth:`restore` plays on in
        Rust; ``episode`` (the core's ``EpisodeSnapshot``) and ``policies`` are there in every case."""
        if self._episode is None:
            raise RuntimeError("nothing to snapshot before reset()")
        snap = {"episode": self._episode.snapshot(), "seat": self._seat, "seed": self._seed,
                "step_count": self._step_count, "episode_id": self._episode_id,
                "policies": _copy_policies(self.policies), "judge": self.judge, "engine": self.engine_report()}
        if isinstance(self._episode, NativeEpisode) and not self._episode.in_python:
            snap["native"] = self._episode.fork()
        return snap

    def restore(self, snap: Mapping[str, Any]) -> ArenaObservation:
        """Stand where ``snap`` (:meth:`snapshot`) was taken. A Rust episode's snapshot (``native``)
        plays on in Rust (on a copy of it: the snapshot stays usable), unless this environment's
        ``engine`` is ``python``; any other is played by the Python core, and :meth:`engine_report`
        says why as the snapshot's did (``engine='python'`` where this environment's setting is why)."""
        judge = snap.get("judge")  # shared, not copied: it may hold a connection
        native = snap.get("native")
        if isinstance(native, NativeEpisode) and self.engine != "python":
            self._episode = native.fork()  # its seat is the snapshot's: both were taken together
            self._policies = {}  # the episode asks its archetypes itself
        else:
            ep_snap: EpisodeSnapshot = snap["episode"]
            if not isinstance(self._episode, Episode):  # a restored episode is played by the Python core
                self._episode = Episode.from_snapshot(ep_snap, (snap["seat"],), judge=judge)
            else:
                self._episode.restore(ep_snap)
                self._episode.controlled = (snap["seat"],)
                self._episode.judge = judge
            self._policies = _copy_policies(snap["policies"])
            self._python_report = _restored_report(snap.get("engine"), self.engine)
        self.judge = judge
        self._seat, self._seed, self._step_count = snap["seat"], snap["seed"], snap["step_count"]
        self._episode_id = snap["episode_id"]
        return self._observe()

    def fork(self) -> GpuArenaEnv:
        """An independent copy of this environment at the current step (policies included). A
        Rust-played episode is forked in Rust (:meth:`NativeEpisode.fork`) and plays on there."""
        other = GpuArenaEnv(**self._defaults, engine=self.engine)
        episode = self._episode
        if not isinstance(episode, NativeEpisode):
            other.restore(self.snapshot())
            return other
        other._episode, other._policies = episode.fork(), {}  # it asks its archetypes itself
        other._seat, other._seed, other._step_count = self._seat, self._seed, self._step_count
        other._episode_id, other.judge = self._episode_id, self.judge
        return other

    def render(self) -> str:
        if self._episode is None:
            return "(not reset)"
        return render_text(self._episode.observe(self._seat))

    def metrics(self, optimum: float | None = None) -> dict[str, Any]:
        """Episode metrics (welfare against the exact optimum, rates, surplus); see ``Episode.metrics``."""
        if self._episode is None:
            raise RuntimeError("no episode: call reset() first")
        return self._episode.metrics(optimum)

    # ------------------------------------------------------------------ helpers

    def _observe(self) -> ArenaObservation:
        assert self._episode is not None
        # the aids are priced as they are read (all of them when the observation is serialised):
        # an in-process driver that never reads an offer's value never pays for it
        view = self._episode.observe(self._seat, lazy=True)
        return observation_from_view(view, metadata={
            "episode_id": self._episode_id, "seed": self._seed, "task": view.task, "split": view.split,
            "step": self._step_count, "engine": self._engine_dict()})

    def _native_engine(self, judge: PitchJudge | None, chosen: Mapping[str, Any]) -> Any:
        """The Rust engine where this environment plays the episode there (see ``engine``), else
        why not (one of :data:`~gpu_arena.native.report.START_REASONS`); ``chosen``: the other
        seats' policies, by seat (``OpponentsSpec.for_seats``)."""
        if self.engine == "python":
            return ENGINE_PYTHON
        if judge is not None:
            return MODEL_JUDGE
        if not all(isinstance(name, str) and name in RUST_SEAT_POLICIES for name in chosen.values()):
            return PYTHON_OPPONENTS
        rs = native_engine()
        return f"{NO_RUST}: {rs}" if isinstance(rs, str) else rs

    def _to_python(self, episode: NativeEpisode, reason: str = REPLAYED) -> Episode:
        """Hand ``episode`` to the Python core where it stands, the archetypes' state included,
        and play it here as any Python episode (its seats' policies in ``policies``); ``reason``
        (:data:`~gpu_arena.native.report.MOVE_REASONS`) is why, for :meth:`engine_report`."""
        self._policies = episode.opponent_policies()
        self._episode = python = episode.python_episode()
        self._python_report = EngineReport(PYTHON, episode.moved_reason or reason, True, episode.rust_rounds)
        return python

    def _policy_action(self, episode: Episode | NativeEpisode, lid: str, policy: Policy) -> Action | RejectedAction:
        bind_world(episode, policy)  # a policy bound to the world moves a Rust episode, saying why
        return policy_move(policy, episode, lid)

    def _resolve_judge(self, spec: Any) -> PitchJudge | None:
        if spec is None or spec == RULE_JUDGE:
            return None
        if isinstance(spec, str):
            if spec not in self._judges:
                if not spec.startswith("llm:"):
                    raise ValueError(f"unknown judge {spec!r}; expected rule or llm:openai:<model>@<base_url>")
                from .llm.judge import make_judge

                self._judges[spec] = make_judge(spec)
            return self._judges[spec]
        if callable(getattr(spec, "judge", None)):
            return spec
        raise ValueError("judge must be 'rule', an LLM judge name (llm:openai:<model>@<base_url>) or a PitchJudge")

    def _build_opponents(self, world: World, chosen: Mapping[str, Any]) -> dict[str, Policy]:
        """The policies ``chosen`` names or holds, by seat."""
        out: dict[str, Policy] = {}
        for lid, p in chosen.items():
            if isinstance(p, str):
                out[lid] = make_seat_policy(world, lid, p)
            elif hasattr(p, "act"):
                out[lid] = p
            else:
                raise ValueError(f"opponent for {lid} must be a policy name or an object with act()")
        return out


def _restored_report(taken: Any, engine: str) -> EngineReport:
    """Why the Python core plays an episode restored from a snapshot without a Rust fork: this
    environment's ``engine='python'``, else the reason of the snapshot's report (``taken``), else
    :data:`~gpu_arena.native.report.RESTORED` (a snapshot made without one)."""
    if engine == PYTHON:
        rounds = taken.rust_rounds if isinstance(taken, EngineReport) else 0
        return EngineReport(PYTHON, ENGINE_PYTHON, False, rounds)
    if isinstance(taken, EngineReport) and taken.playing == PYTHON and taken.reason is not None:
        return taken
    return EngineReport(PYTHON, RESTORED, False, taken.rust_rounds if isinstance(taken, EngineReport) else 0)


def _copy_policies(policies: Mapping[str, Policy]) -> dict[str, Policy]:
    import copy

    return copy.deepcopy(dict(policies))


__all__ = ["REWARD_COLUMNS", "GpuArenaEnv"]
