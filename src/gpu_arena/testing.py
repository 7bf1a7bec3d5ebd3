"""Conformance checks for your own policies and for the engine: run them in your tests.

The project's own property tests use the same checks, so a policy or a wrapper that passes them
keeps the contracts the arena's results rest on (see ``docs/design.md``, Contracts):

- :func:`check_reward_telescopes`: over a finished episode, each lab's rewards sum to its surplus
  over its starting potential divided by its reward scale, plus its penalties; every reward row
  has all columns, finite, with ``normalized_reward`` in [-1, 1] and the sum of the others.
- :func:`check_view_privacy`: no seat's view changes when other labs' private job values do.
- :func:`check_determinism`: the same world, policies and seeds give the same transcript, and the
  recorded actions replay to it.
- :func:`check_policy_contract`: a policy answers every view of whole episodes, in any seat, with
  an action (or a ``RejectedAction``), never an exception; it leaves the view it was given as it
  was; built twice with the same seed it plays the same moves.

Each raises :class:`ConformanceError` (an ``AssertionError``, so pytest reports it as a failed
assertion) with what broke and where. ``policy`` arguments are factories called as ``factory(seed=...)``
(``lambda seed: MyPolicy(seed=seed)``, or ``functools.partial(make_policy, "rule_expert")``); a factory
that raises is a ``ConformanceError`` too, with its exception as the cause. :func:`play` and
:func:`check_determinism` turn a policy's answers into moves as the environment does
(:func:`~gpu_arena.core.policy.policy_move`: a dict or an ``ArenaAction`` is read, a policy that raises
loses its move as ``policy_error``); :func:`check_policy_contract` is the one that reports such a policy.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from typing import Any, Protocol

from .core.engine import Episode
from .core.observe import observe
from .core.policy import policy_move, seat_view
from .core.records import action_from_record, action_record
from .core.serialize import coerce_action
from .core.types import REWARD_COLUMNS, RejectedAction


class PolicyFactory(Protocol):
    """Builds a policy for a seed: ``lambda seed: MyPolicy(seed=seed)``, ``partial(make_policy, name)``."""

    def __call__(self, *, seed: int) -> Any: ...

_TOLERANCE = 1e-9


class ConformanceError(AssertionError):
    """A conformance check failed; the message says which contract, and where."""


def _fail(what: str) -> None:
    raise ConformanceError(what)


class _NaN:
    """Stands for every NaN in :func:`_canonical` (NaN != NaN, but two NaNs in one place are the same move)."""

    def __repr__(self) -> str:
        return "nan"


_NAN = _NaN()


def _canonical(value: Any) -> Any:
    """``value`` (a transcript, an action record: JSON-ready) with lists for tuples and one object for
    every NaN, so ``==`` compares what was played: two NaNs in the same place are equal."""
    if isinstance(value, float) and math.isnan(value):
        return _NAN
    if isinstance(value, dict):
        return {_canonical(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    return bool(_canonical(a) == _canonical(b))


def _describe(factory: Any) -> str:
    """A short name for a policy factory (or a policy), for messages."""
    if isinstance(factory, functools.partial):
        args = [repr(a) for a in factory.args] + [f"{k}={v!r}" for k, v in factory.keywords.items()]
        return f"{_describe(factory.func)}({', '.join(args)})"
    name = getattr(factory, "__qualname__", None) or type(factory).__qualname__
    return str(name)


def _build(factory: PolicyFactory, seed: int, where: str) -> Any:
    """``factory(seed=seed)``; a factory that raises is a :class:`ConformanceError` caused by its exception."""
    try:
        return factory(seed=seed)
    except Exception as e:
        raise ConformanceError(f"{where}: the policy factory {_describe(factory)} raised "
                               f"{type(e).__name__}: {e} (called with seed={seed})") from e


def check_reward_rows(rows: Mapping[str, Mapping[str, float]], where: str = "") -> None:
    """One round's reward rows (lab -> column -> value): every column present and finite,
    ``normalized_reward`` in [-1, 1] and equal to the sum of the others, penalties never positive."""
    for lab, row in rows.items():
        if set(row) != set(REWARD_COLUMNS):
            _fail(f"{where}{lab}: reward columns {sorted(row)} are not the arena's {sorted(REWARD_COLUMNS)}")
        if not all(math.isfinite(v) for v in row.values()):
            _fail(f"{where}{lab}: a reward column is not finite: {dict(row)}")
        total = row["normalized_reward"]
        if not -1.0 <= total <= 1.0:
            _fail(f"{where}{lab}: normalized_reward {total} outside [-1, 1]")
        parts = sum(row[c] for c in REWARD_COLUMNS if c != "normalized_reward")
        if abs(parts - total) > 1e-12:
            _fail(f"{where}{lab}: the columns sum to {parts}, normalized_reward is {total}")
        for c in ("invalid_action_penalty", "spam_penalty", "breach_penalty"):
            if row[c] > 0:
                _fail(f"{where}{lab}: {c} is positive ({row[c]})")


def check_reward_telescopes(episode: Episode) -> None:
    """A finished episode's returns telescope: Σ rewards = (Φ_T − Φ_0) / scale + penalties for every
    lab, and Φ_T is what the lab ends with (budget plus realised value)."""
    if not episode.done:
        _fail("the episode is not finished: play it to the end first")
    world = episode.world
    for lab_id, lab in world.labs.items():
        scale = world.reward_scale[lab_id]
        surplus = episode.potential(lab_id) - world.initial_potential[lab_id]
        expected = surplus / scale + episode.penalties[lab_id]
        if abs(episode.returns[lab_id] - expected) > _TOLERANCE * max(1.0, abs(expected)):
            _fail(f"{lab_id}: the rewards sum to {episode.returns[lab_id]!r}, the surplus over the start is "
                  f"{expected!r} (surplus {surplus} / scale {scale} + penalties {episode.penalties[lab_id]})")
        final = lab.budget + lab.realized_value
        if abs(episode.potential(lab_id) - final) > _TOLERANCE * max(1.0, abs(final)):
            _fail(f"{lab_id}: the final potential {episode.potential(lab_id)} is not budget + realised value {final}")


def check_view_privacy(episode: Episode) -> None:
    """Non-interference: changing every other lab's private job values (those of coalitions the seat
    shares excepted: their value is its own payoff) changes nothing in any seat's view."""
    world = episode.world
    for lab_id in world.labs:
        twin = copy.deepcopy(world)
        for job in twin.jobs.values():
            shared = job.coalition_id is not None and lab_id in twin.coalitions[job.coalition_id].members
            if job.owner != lab_id and not shared:
                job.value = job.value * 1.37 + 0.11
        if asdict(observe(twin, lab_id)) != asdict(observe(world, lab_id)):
            _fail(f"{lab_id}'s view at round {world.round_index} depends on other labs' private job values")


def play(task: str, split: str, seed: int, policies: Mapping[str, PolicyFactory] | PolicyFactory, *,
         judge_mode: str = "none", every_round: Callable[[Episode, Mapping[str, Any]], None] | None = None
         ) -> Episode:
    """Play one whole episode of the core engine with a policy in every seat (one factory for all,
    or seat -> factory; a seat left out waits), each built with a seed derived from ``seed`` and
    its seat. Each answer becomes a move as the environment makes it
    (:func:`~gpu_arena.core.policy.policy_move`: a dict or an ``ArenaAction`` is read, an unreadable
    answer is an invalid move, a policy that raises loses its move as ``policy_error``).
    ``every_round(episode, rewards)`` runs after each round."""
    episode = Episode.new(task, split, seed, controlled=(), judge_mode=judge_mode)
    seats = list(episode.world.labs)
    factories = dict.fromkeys(seats, policies) if callable(policies) else dict(policies)
    drivers = {lab: _build(factories[lab], seed * 1009 + i, f"{task}/{split} seed {seed}, {lab}")
               for i, lab in enumerate(seats) if lab in factories}
    while not episode.done:
        report = episode.step({lab: policy_move(p, episode, lab) for lab, p in drivers.items()})
        if every_round is not None:
            every_round(episode, report.rewards)
    return episode


def check_determinism(task: str, split: str, seed: int, policies: Mapping[str, PolicyFactory] | PolicyFactory
                      ) -> None:
    """Two plays of one world with freshly built policies give the same transcript and returns,
    and replaying the recorded actions gives them again."""
    first = play(task, split, seed, policies)
    second = play(task, split, seed, policies)
    if not _same(first.transcript, second.transcript):
        rounds = [r["round"] for r, s in zip(first.transcript, second.transcript, strict=False) if not _same(r, s)]
        _fail(f"{task}/{split} seed {seed}: two plays differ (first at round {rounds[0] if rounds else '?'})")
    replay = Episode.new(task, split, seed, controlled=())
    for record in first.transcript:
        replay.step({lab: action_from_record(a) for lab, a in record["actions"].items()})
    if not _same(replay.transcript, first.transcript) or not _same(replay.returns, first.returns):
        _fail(f"{task}/{split} seed {seed}: the recorded actions do not replay to the same episode")


def check_policy_contract(policy: PolicyFactory, tasks: Iterable[str] = ("single_trade", "market_round",
                                                                          "coalition_market"),
                          seeds: Iterable[int] = (0, 1), split: str = "train") -> None:
    """``policy`` (a factory ``seed -> policy``) in every seat of whole episodes: each answer is an
    action the rules can read or a ``RejectedAction`` (never an exception, never an action holding a
    value no field takes, such as an array), the view it was given is unchanged after ``act``, and a
    second policy built with the same seed plays the same moves (NaNs in the same places included).
    ``ValueError`` if ``tasks`` or ``seeds`` is empty."""
    tasks, seeds = tuple(tasks), tuple(seeds)
    if not tasks or not seeds:
        raise ValueError("check_policy_contract needs at least one task and one seed: "
                         f"tasks={tasks!r}, seeds={seeds!r}")
    for task in tasks:
        for seed in seeds:
            moves: list[list[Any]] = []
            for _attempt in range(2):
                episode = Episode.new(task, split, seed, controlled=())
                seats = list(episode.world.labs)
                drivers = {lab: _build(policy, seed * 1009 + i, f"{task}/{split} seed {seed}, {lab}")
                           for i, lab in enumerate(seats)}
                played: list[Any] = []
                while not episode.done:
                    actions: dict[str, Any] = {}
                    for lab, driver in drivers.items():
                        where = f"{task}/{split} seed {seed}, round {episode.world.round_index}, {lab}"
                        name = _describe(driver)
                        try:
                            view = seat_view(driver, episode, lab)
                        except Exception as e:  # bind, for a policy that plans with the world
                            raise ConformanceError(f"{where}: {name}.bind raised {type(e).__name__}: {e}") from e
                        before = copy.deepcopy(view)
                        try:
                            answer = driver.act(view)
                        except Exception as e:  # the contract: a policy never raises on a view
                            raise ConformanceError(f"{where}: {name}.act raised {type(e).__name__}: {e}") from e
                        if asdict(view) != asdict(before):
                            _fail(f"{where}: {name}.act changed the view it was given")
                        # read as the environment reads it (policy_move)
                        action = answer if isinstance(answer, RejectedAction) else coerce_action(answer)
                        if isinstance(action, RejectedAction) and not isinstance(answer, RejectedAction):
                            _fail(f"{where}: {name}.act returned something that is not an action ({action.code}: "
                                  f"{action.message})")
                        record = action if isinstance(action, RejectedAction) else action_record(action)
                        if isinstance(record, RejectedAction) and not isinstance(action, RejectedAction):
                            _fail(f"{where}: {name}.act returned an action holding a value the arena cannot "
                                  f"read ({record.code}: {record.message}); the engine plays it as an invalid move")
                        actions[lab] = action
                        played.append(record)
                    episode.step(actions)
                moves.append(played)
            if not _same(moves[0], moves[1]):
                _fail(f"{task}/{split} seed {seed}: two policies built with the same seeds played differently")


__all__ = ["ConformanceError", "PolicyFactory", "check_determinism", "check_policy_contract", "check_reward_rows",
           "check_reward_telescopes", "check_view_privacy", "play"]
