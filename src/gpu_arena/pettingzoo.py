"""The arena as a PettingZoo ``ParallelEnv``: every lab is an agent and acts every round.

``parallel_env(task="market_round", split="train", render_mode=None, **reset_options)`` builds it.
Each ``step({lab: action})`` resolves one round of the core engine with every lab's action at
once (labs left out wait) and returns, per lab, its own observation, its own Φ-based reward, the
terminations and truncations, and an info dict with the 11 reward columns and the result of its
action. No seat is driven by a scripted opponent here: self-play, population training and
mixed teams are the caller's choice of actions.

Observations (``observation_format``):

* ``"view"`` (default): the lab's core :class:`~gpu_arena.core.views.SeatView` — an immutable
  value with the same field names as the wire ``ArenaObservation``; its decision aids are priced
  when first read.
* ``"json"``: the wire observation as a JSON string (what the server sends).
* ``"text"``: :func:`~gpu_arena.core.views.render_text` of the view (a prompt base).

Actions are ``ArenaAction`` objects, mappings with its fields, JSON strings, or core ``Action``s.
A malformed or illegal action is booked as an invalid move of that lab (a bounded penalty, the
code in ``infos[lab]["result"]``), never an exception. The action space's ``sample()`` draws a
random, well-formed action (most of them illegal in the state: it knows no ids), which is what
PettingZoo's API and seed tests need.

Requires the ``marl`` extra (``pip install 'gpu-arena[marl]'``; the Makefile installs it).
"""

from __future__ import annotations

import secrets
import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv

from .core.engine import Episode
from .core.tasks import task_params
from .core.types import ACTION_TYPES, REWARD_COLUMNS, Action, RejectedAction
from .core.views import SeatView, render_text
from .env import check_world_args
from .models import ArenaAction, observation_from_view, read_action

OBSERVATION_FORMATS = ("view", "json", "text")
RESET_OPTIONS = ("task", "split", "judge_mode")
RENDER_MODES = ("ansi", "human")


class ArenaActionSpace(gymnasium.Space[dict[str, Any]]):
    """Actions of one lab: ``ArenaAction``-shaped dicts. ``contains`` says whether the wire would
    read it as an action (its meaning is the rules' business); ``sample`` draws a well-formed one."""

    def __init__(self, agent: str, labs: list[str], seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.agent = agent
        self.others = [lab for lab in labs if lab != agent]

    def contains(self, x: Any) -> bool:
        return not isinstance(read_action(x), RejectedAction)

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        rng = self.np_random
        kind = str(rng.choice(ACTION_TYPES))
        action: dict[str, Any] = {"action_type": kind}
        if kind in ("send_offer", "counter_pitch", "send_message") and self.others:
            action["target_lab_id"] = str(rng.choice(self.others))
        if kind in ("send_offer", "counter_offer", "make_pitch", "counter_pitch", "form_coalition"):
            action["payment"] = round(float(rng.uniform(0.0, 20.0)), 2)
        if kind in ("send_offer", "counter_offer", "reserve_capacity", "release_capacity", "allocate_to_job"):
            action["block_ids"] = [f"b_{self.agent.removeprefix('lab_')}_{int(rng.integers(0, 5))}"]
        if kind in ("accept_offer", "reject_offer", "counter_offer"):
            action["offer_id"] = f"o_{int(rng.integers(0, 20))}"
        if kind == "commit_to_coalition":
            action["coalition_id"] = f"c_{int(rng.integers(0, 5))}"
        if kind in ("send_message", "make_pitch", "counter_pitch"):
            action["message"] = "We can put this block to use."
        return action

    def __repr__(self) -> str:
        return f"ArenaActionSpace({self.agent})"


class SeatViewSpace(gymnasium.Space[Any]):
    """Observations of one lab in one of the :data:`OBSERVATION_FORMATS`. ``sample`` is the lab's
    first observation in a world drawn from the space's own seed."""

    def __init__(self, agent: str, task: str, split: str, observation_format: str, seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.agent, self.task, self.split, self.format = agent, task, split, observation_format

    def contains(self, x: Any) -> bool:
        if self.format == "view":
            return isinstance(x, SeatView) and x.controlled_lab_id == self.agent
        return isinstance(x, str)

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        for _ in range(1000):  # a world of the task that has this lab (coalition_market has 4 or 5)
            episode = Episode.new(self.task, self.split, int(self.np_random.integers(0, 2**31)), controlled=())
            if self.agent in episode.world.labs:
                return _render(episode.observe(self.agent, lazy=True), self.format)
        raise RuntimeError(f"no {self.task} world has {self.agent}")

    def __repr__(self) -> str:
        return f"SeatViewSpace({self.agent}, {self.format})"


def _render(view: SeatView, observation_format: str) -> Any:
    if observation_format == "json":
        return observation_from_view(view).model_dump_json()
    if observation_format == "text":
        return render_text(view)
    return view


class GpuArenaParallelEnv(ParallelEnv[str, Any, Any]):
    """Every lab of one episode as a PettingZoo agent (see the module docstring).

    Contract:

    * ``possible_agents`` are the labs a world of the task may have (``coalition_market`` draws 4
      or 5: ``lab_4`` is an agent only in worlds that have it); ``agents`` are the labs of the
      current episode until it ends, then none.
    * ``reset(seed=None, options=None)``: the same seed (and options) gives the same world and,
      with the same actions, the same transcript, rewards and observations. Without a seed the
      next world's seed is drawn from the environment's own generator (seeded by the last seeded
      reset). ``options`` may set ``task``, ``split`` and ``judge_mode`` for this and later
      episodes; other keys are ignored with a warning.
    * ``step(actions)``: one round. Rewards are each lab's own (summing, over an episode, to its
      (final utility − BATNA) / reward_scale plus its penalties); ``infos[lab]`` carries
      ``reward_breakdown`` (the 11 columns), ``result`` (ok, code, message) and ``round``. An
      action for a lab that is not an agent of this episode, ``step`` before ``reset`` and
      ``step`` after the end raise ``ValueError`` / ``RuntimeError`` before anything is applied.
    """

    metadata = {"name": "gpu_arena_v0", "render_modes": list(RENDER_MODES), "is_parallelizable": True}

    def __init__(self, task: str = "market_round", split: str = "train", render_mode: str | None = None,
                 observation_format: str = "view", judge_mode: str = "none") -> None:
        if render_mode not in (None, *RENDER_MODES):
            raise ValueError(f"unknown render_mode {render_mode!r}; expected None, 'ansi' or 'human'")
        if observation_format not in OBSERVATION_FORMATS:
            raise ValueError(f"unknown observation_format {observation_format!r}; "
                             f"expected one of {', '.join(OBSERVATION_FORMATS)}")
        self.render_mode = render_mode
        self.observation_format = observation_format
        self._options: dict[str, Any] = {}
        self._configure({"task": task, "split": split, "judge_mode": judge_mode})
        self.agents: list[str] = []
        self._episode: Episode | None = None
        self._rng: np.random.Generator | None = None

    # ------------------------------------------------------------------ spaces

    def _configure(self, options: Mapping[str, Any]) -> None:
        merged = {**self._options, **options}
        task, split, judge_mode = merged["task"], merged["split"], merged["judge_mode"]
        check_world_args(task, split, judge_mode)
        if merged.get("task") != self._options.get("task") or merged.get("split") != self._options.get("split"):
            most = task_params(task, split).n_labs[1]
            self.possible_agents = [f"lab_{i}" for i in range(most)]
            # PettingZoo asks for the very same space object on every call (seeding relies on it)
            self._action_spaces = {a: ArenaActionSpace(a, self.possible_agents) for a in self.possible_agents}
            self._observation_spaces = {a: SeatViewSpace(a, task, split, self.observation_format)
                                        for a in self.possible_agents}
        self._options = merged

    def observation_space(self, agent: str) -> gymnasium.Space[Any]:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.Space[Any]:
        return self._action_spaces[agent]

    # ------------------------------------------------------------------ the loop

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(f"options must be a mapping of reset options ({', '.join(RESET_OPTIONS)}), "
                             f"got {type(options).__name__}")
        if options:
            unknown = set(options) - set(RESET_OPTIONS)
            if unknown:
                warnings.warn(f"gpu_arena ignores reset options {', '.join(sorted(map(str, unknown)))}; "
                              f"it reads {', '.join(RESET_OPTIONS)}", stacklevel=2)
            self._configure({k: v for k, v in options.items() if k in RESET_OPTIONS})
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
                raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
            self._rng = np.random.default_rng(int(seed))
            world_seed = int(seed)
        else:
            if self._rng is None:
                self._rng = np.random.default_rng(secrets.randbelow(2**31))
            world_seed = int(self._rng.integers(0, 2**31))
        opts = self._options
        episode = Episode.new(opts["task"], opts["split"], world_seed, controlled=(), judge_mode=opts["judge_mode"])
        episode.controlled = tuple(episode.world.labs)  # every lab is external: all of them finishing ends it
        self._episode = episode
        self.agents = list(episode.world.labs)
        observations = {lab: self._observe(lab) for lab in self.agents}
        infos = {lab: {"seed": world_seed, "round": episode.world.round_index} for lab in self.agents}
        return observations, infos

    def step(self, actions: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, float], dict[str, bool],
                                                        dict[str, bool], dict[str, dict[str, Any]]]:
        episode = self._episode
        if episode is None:
            raise RuntimeError("call reset() before step()")
        if episode.done or not self.agents:
            raise RuntimeError("the episode is over; call reset() for a new one")
        if not isinstance(actions, Mapping):
            raise ValueError(f"actions must be a mapping agent -> action, got {type(actions).__name__}")
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions for agents not in this episode: {', '.join(sorted(map(str, unknown)))}; "
                             f"agents: {', '.join(self.agents)}")
        moves: dict[str, Action | RejectedAction | None] = {lab: read_action(a) for lab, a in actions.items()}
        report = episode.step(moves)
        done = report.done
        agents = self.agents
        observations = {lab: self._observe(lab) for lab in agents}
        rewards = {lab: report.rewards[lab]["normalized_reward"] for lab in agents}
        terminations = dict.fromkeys(agents, done)
        truncations = dict.fromkeys(agents, False)
        infos: dict[str, dict[str, Any]] = {}
        for lab in agents:
            result = report.results.get(lab)
            infos[lab] = {"round": report.round_index,
                          "reward_breakdown": {c: report.rewards[lab][c] for c in REWARD_COLUMNS},
                          "result": {"ok": result.ok, "code": result.code, "message": result.message}
                          if result else {"ok": True, "code": "ok", "message": "waited"}}
        if done:
            self.agents = []
        if self.render_mode == "human":
            print(self.render())
        return observations, rewards, terminations, truncations, infos

    def _observe(self, lab: str) -> Any:
        assert self._episode is not None
        return _render(self._episode.observe(lab, lazy=True), self.observation_format)

    # ------------------------------------------------------------------ extras

    @property
    def episode(self) -> Episode | None:
        """The core episode (for harnesses: transcript, metrics, snapshots)."""
        return self._episode

    def render(self) -> str | None:
        if self.render_mode is None:
            warnings.warn("render() without a render_mode: pass render_mode='ansi' or 'human'", stacklevel=2)
            return None
        if self._episode is None:
            return "(not reset)"
        return "\n\n".join(render_text(self._episode.observe(lab, lazy=True)) for lab in self._episode.world.labs)

    def close(self) -> None:
        self._episode = None
        self.agents = []


def parallel_env(task: str = "market_round", split: str = "train", render_mode: str | None = None,
                 observation_format: str = "view", **reset_options: Any) -> GpuArenaParallelEnv:
    """A :class:`GpuArenaParallelEnv`; ``reset_options`` (``judge_mode``) set its defaults."""
    unknown = set(reset_options) - set(RESET_OPTIONS)
    if unknown:
        raise ValueError(f"unknown options {', '.join(sorted(unknown))}; expected {', '.join(RESET_OPTIONS)}")
    return GpuArenaParallelEnv(task=task, split=split, render_mode=render_mode,
                               observation_format=observation_format, **reset_options)


__all__ = ["ArenaAction", "ArenaActionSpace", "GpuArenaParallelEnv", "SeatViewSpace", "parallel_env"]
