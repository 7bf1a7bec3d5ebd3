"""The core ``Episode``'s interface over the Rust engine (decision 0026).

A :class:`NativeEpisode` plays a world in ``gpu_arena_rs`` with one seat driven from outside and
every other seat played, in Rust too, by the archetype its world assigned (the environment's
default) or by ``random_valid``. It answers what callers of :class:`~gpu_arena.core.engine.Episode` read (``done``,
``observe``, ``transcript``, ``last_results``, ``last_rewards``, ``phi``, ``returns``, ``world``,
``metrics``, ``snapshot``) with the same values, bit for bit (``tests/native/``). Where a caller
needs the Python objects themselves (it reads ``world``, the god view a policy binds to and may
hold) or Rust cannot go on (a move it cannot hold), the episode moves to the Python core where it
stands, the archetypes' own state carried over, and plays on there: the same object answers, from
then on through a Python :class:`~gpu_arena.core.engine.Episode` (:attr:`~NativeEpisode.moved_reason`
says why, one of :data:`~gpu_arena.native.report.MOVE_REASONS`). :meth:`~NativeEpisode.world_view`
reads the world without that move (a copy: changing it changes nothing), and so do ``observe``,
``snapshot``, ``metrics`` and :meth:`~NativeEpisode.fork`, which copies the episode where it stands,
in Rust while it plays there. :func:`bind_world` moves it, naming why, before a policy that plans
with the whole world is handed the live one.

Whether it may play here at all is :func:`gpu_arena.native.twin.native_engine`'s to say.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from ..core.engine import Episode, EpisodeSnapshot, RoundReport
from ..core.policy import PolicyBase, policy_move
from ..core.types import (
    Action,
    ActionResult,
    Auction,
    Block,
    Coalition,
    Event,
    Job,
    Lab,
    Message,
    Offer,
    Pitch,
    RejectedAction,
    ScheduledShock,
    World,
)
from ..core.views import SeatView
from ..core.worldgen import world_seed
from ..policies import DEFAULT_OPPONENTS, make_seat_policy
from .report import ASKED, MOVE_RUST_CANNOT_HOLD, POLICY_BOUND, WORLD_READ


def _archetype_seed(world: World, lab_id: str) -> int:
    """The seed :func:`~gpu_arena.policies.make_seat_policy` gives a seat's policy."""
    return world_seed(f"policy:{lab_id}", world.split, world.seed)


# the seat policies Rust plays (by make_seat_policy's names): each seat's archetype, random_valid
RUST_SEAT_POLICIES = frozenset({DEFAULT_OPPONENTS, "random_valid"})


class NativeEpisode:
    """An episode of ``world`` in the Rust engine: ``seat`` is driven by :meth:`step_seat`, every
    other lab plays, in Rust, the seat policy ``opponents`` names for it (one of
    :data:`RUST_SEAT_POLICIES`; default: its world's archetype). See the module's docstring for
    the contract."""

    judge = None
    strict = False

    def __init__(self, world: World, seat: str, rs: ModuleType, opponents: Mapping[str, str] | None = None) -> None:
        self.controlled: tuple[str, ...] = (seat,)
        self._params = world.params  # the task's ranges: read, never changed, not kept in Rust
        self._native = rs.Episode(world, [seat])
        self._names = {lid: (opponents or {}).get(lid, DEFAULT_OPPONENTS) for lid in world.labs if lid != seat}
        for lid, name in self._names.items():
            if name not in RUST_SEAT_POLICIES:
                raise ValueError(f"Rust plays {', '.join(sorted(RUST_SEAT_POLICIES))}, not {name!r}")
            lab = world.labs[lid]
            self._native.add_opponent(lid, lab.archetype if name == DEFAULT_OPPONENTS else name,
                                      _archetype_seed(world, lid), dict(lab.params))
        self._step = 0  # rounds played: keys the copies below
        self._copies: dict[str, tuple[int, Any]] = {}
        self._views: dict[tuple[str, bool], tuple[int, SeatView]] = {}
        self._transcript: list[dict[str, Any]] = []
        self._python: Episode | None = None  # set once the episode has moved to the Python core
        self._policies: dict[str, Any] = {}  # the archetypes' Python policies from then on
        self.moved_reason: str | None = None  # why it moved to the Python core (report.MOVE_REASONS; None: it has not)

    def fork(self) -> NativeEpisode:
        """An independent copy standing where this one stands, sharing nothing that play changes:
        in Rust (``gpu_arena_rs.Episode.fork``: the world and its random stream, the ledger, the
        transcript, the last results and rewards, each archetype's state and random stream) while
        the episode plays there, else a fork of its Python episode with copies of the archetypes'
        policies. The same moves then play the same in both."""
        other = NativeEpisode.__new__(NativeEpisode)
        other.controlled, other._params, other._names = self.controlled, self._params, dict(self._names)
        other._native = self._native.fork()
        other._step = self._step
        other._copies = {}  # what they hold (dicts, a world) the caller may change: built again
        other._views = dict(self._views)  # views are frozen values, shared by every reader
        other._transcript = []  # read again from the fork's Rust transcript (its dicts are the caller's)
        other._python = None if self._python is None else self._python.fork()
        other._policies = copy.deepcopy(self._policies)
        other.moved_reason = self.moved_reason
        return other

    def __deepcopy__(self, memo: dict[int, Any]) -> NativeEpisode:
        """``copy.deepcopy`` is :meth:`fork` (the Rust episode has no other copy)."""
        other = memo[id(self)] = self.fork()
        return other

    # ------------------------------------------------------------------ stepping

    @property
    def rust_rounds(self) -> int:
        """How many of its rounds were played in Rust."""
        return self._step

    @property
    def in_python(self) -> bool:
        """Whether the episode has moved to the Python core."""
        return self._python is not None

    def to_python(self, reason: str = ASKED) -> Episode:
        """Move the episode to the Python core where it stands (once; ``reason`` says why, kept in
        :attr:`moved_reason`: one of :data:`~gpu_arena.native.report.MOVE_REASONS`); its ``Episode``."""
        if self._python is None:
            self._policies = self.opponent_policies()
            self._python = self.python_episode()
            self.moved_reason = reason
        return self._python

    @property
    def done(self) -> bool:
        return self._python.done if self._python is not None else bool(self._native.done)

    def step_seat(self, seat: str, action: Action | RejectedAction | None) -> RoundReport:
        """One round: ``seat`` plays ``action``, the archetypes theirs (each on its own view)."""
        report = self.play_seat(seat, action)
        return report if report is not None else self._report(self._native.last_report())

    def play_seat(self, seat: str, action: Action | RejectedAction | None) -> RoundReport | None:
        """:meth:`step_seat`, leaving the round's report unbuilt where Rust played it (None): the
        environment reads the seat's observation instead."""
        if seat not in self.controlled:
            raise ValueError(f"{seat} is not this episode's driven seat")
        if self._python is None:
            try:
                self._native.step_seat(seat, action, False)
                self._step += 1
                return None
            except ValueError:  # a move Rust cannot hold (nothing changed): this round and the rest in Python
                self.to_python(MOVE_RUST_CANNOT_HOLD)
        python = self.to_python()  # moved already: the reason it moved stands
        moves: dict[str, Action | RejectedAction | None] = {seat: action}
        for lid, policy in self._policies.items():
            moves[lid] = policy_move(policy, python, lid)
        return python.step(moves)

    def step(self, actions: Mapping[str, Action | RejectedAction | None]) -> RoundReport:
        """``Episode.step``: every seat's move given (the archetypes are not asked)."""
        if self._python is None:
            try:
                return self._report(self._native.step(dict(actions)), new=True)
            except ValueError:
                self.to_python(MOVE_RUST_CANNOT_HOLD)
        return self.to_python().step(actions)

    def _report(self, raw: tuple[Any, ...], *, new: bool = False) -> RoundReport:
        round_index, order, results, rewards, done = raw
        self._step += new
        return RoundReport(round_index, order, {lid: ActionResult(*r) for lid, r in results.items()}, rewards, done)

    # ------------------------------------------------------------------ what callers read

    def observe(self, lab_id: str, *, aids: bool = True, lazy: bool = False) -> SeatView:
        """``lab_id``'s view now, every aid priced (a lazy view prices the same values on read).
        One view per seat and state, shared by every reader."""
        if self._python is not None:
            return self._python.observe(lab_id, aids=aids, lazy=lazy)
        hit = self._views.get((lab_id, aids))
        if hit is not None and hit[0] == self._step:
            return hit[1]
        view: SeatView = self._native.observe(lab_id, aids)
        self._views[(lab_id, aids)] = (self._step, view)
        return view

    def _copy(self, name: str, make: Any) -> Any:
        hit = self._copies.get(name)
        if hit is None or hit[0] != self._step:
            hit = self._copies[name] = (self._step, make())
        return hit[1]

    @property
    def transcript(self) -> list[dict[str, Any]]:
        if self._python is not None:
            return self._python.transcript
        if len(self._transcript) < self._step:
            self._transcript.extend(self._native.transcript(len(self._transcript)))
        return self._transcript

    @property
    def last_results(self) -> dict[str, ActionResult]:
        if self._python is not None:
            return self._python.last_results
        return self._last()[0]

    @property
    def last_rewards(self) -> dict[str, dict[str, float]]:
        if self._python is not None:
            return self._python.last_rewards
        return self._last()[1]

    def _last(self) -> tuple[dict[str, ActionResult], dict[str, dict[str, float]]]:
        """Each lab's last result and reward row, read from Rust together (once a round)."""
        def read() -> tuple[dict[str, ActionResult], dict[str, dict[str, float]]]:
            results, rewards = self._native.last()
            return {lid: ActionResult(*r) for lid, r in results.items()}, rewards

        return self._copy("last", read)

    def _ledger(self) -> tuple[dict[str, tuple[float, float]], dict[str, float], dict[str, float]]:
        if self._python is not None:
            return self._python.phi, self._python.returns, self._python.penalties
        return self._copy("ledger", self._native.ledger)

    @property
    def phi(self) -> dict[str, tuple[float, float]]:
        return self._ledger()[0]

    @property
    def returns(self) -> dict[str, float]:
        return self._ledger()[1]

    @property
    def penalties(self) -> dict[str, float]:
        return self._ledger()[2]

    @property
    def world(self) -> World:
        """The world itself: a caller may hold it or bind a policy to it, so the episode moves to
        the Python core first (:data:`~gpu_arena.native.report.WORLD_READ`). To read the world,
        :meth:`world_view` moves nothing."""
        return self.to_python(WORLD_READ).world

    def world_view(self) -> World:
        """The world now, to read: a ``World`` of its own, built afresh from the Rust engine's state
        on each call (about 65, 100 and 165 µs on the three tasks), so changing it changes neither
        the episode nor what another reader sees. Reading it leaves the episode in Rust. Once the
        episode is in Python, a deep copy of its world."""
        if self._python is not None:
            return copy.deepcopy(self._python.world)
        return world_from_state(self._native.world_state(), self._params)

    def world_copy(self) -> World:
        """The world now, built once a round and shared by this episode's own readers (its
        snapshot, the archetypes' Python twins), which only read it. Callers read
        :meth:`world_view`: nobody else holds that copy."""
        if self._python is not None:
            return copy.deepcopy(self._python.world)
        return self._copy("world", lambda: world_from_state(self._native.world_state(), self._params))

    def potential(self, lab_id: str) -> float:
        v, m = self.phi[lab_id]
        return v + m

    def metrics(self, optimum: float | None = None) -> dict[str, Any]:
        return (self._python or self.python_episode()).metrics(optimum)

    def snapshot(self) -> EpisodeSnapshot:
        if self._python is not None:
            return self._python.snapshot()
        return copy.deepcopy(EpisodeSnapshot(
            self.world_copy(), dict(self.phi), dict(self.returns), list(self.transcript), dict(self.last_results),
            {lid: dict(row) for lid, row in self.last_rewards.items()}, dict(self.penalties)))

    # ------------------------------------------------------------------ handing over to Python

    def python_episode(self) -> Episode:
        """The Python core's ``Episode`` standing where this one stands (a copy)."""
        if self._python is not None:
            return Episode.from_snapshot(self._python.snapshot(), self.controlled)
        return Episode.from_snapshot(self.snapshot(), self.controlled)

    def opponent_policies(self) -> dict[str, Any]:
        """The archetypes' Python policies, each in the state its Rust twin has now (its
        parameters, grudges, asked blocks, refusers and random stream); once the episode is in
        Python, the policies playing there."""
        if self._python is not None:
            return dict(self._policies)
        world = self.world_copy()
        out: dict[str, Any] = {}
        for lid, state in self._native.opponent_states().items():
            policy = make_seat_policy(world, lid, self._names[lid])
            for name, value in state.items():
                if name == "rng":
                    rng = random.Random()
                    rng.setstate(value)
                    value = rng
                elif name == "refusers":
                    value = set(value)
                setattr(policy, name, value)
            out[lid] = policy
        return out


def bind_world(episode: Any, policy: Any) -> None:
    """Before ``policy`` observes ``episode``: where the policy plans with the whole world
    (``needs_world``: :func:`~gpu_arena.core.policy.seat_view` binds it to the live world, which it
    may hold) and Rust plays the episode, move it to the Python core, naming why
    (:data:`~gpu_arena.native.report.POLICY_BOUND`). Any other policy or episode: nothing."""
    if isinstance(episode, NativeEpisode) and isinstance(policy, PolicyBase) and policy.needs_world:
        episode.to_python(POLICY_BOUND)


def read_world(episode: Episode | NativeEpisode) -> World:
    """``episode``'s world to read, without moving it: a Rust episode's :meth:`~NativeEpisode.world_view`
    (a copy of its own), a Python ``Episode``'s world itself (read it; do not change it)."""
    return episode.world_view() if isinstance(episode, NativeEpisode) else episode.world


def world_from_state(state: Mapping[str, Any], params: Any) -> World:
    """A Python ``World`` from the plain state the Rust engine writes (``world_state``)."""
    def lab(d: Mapping[str, Any]) -> Lab:
        sig = d["last_signature"]
        return Lab(**{**d, "params": dict(d["params"]),
                      "last_signature": None if sig is None else tuple(tuple(p) for p in sig)})

    def offer(d: Mapping[str, Any]) -> Offer:
        return Offer(**{**d, "block_ids": tuple(d["block_ids"]), "requested_block_ids": tuple(d["requested_block_ids"]),
                        "conditions": dict(d["conditions"])})

    def coalition(d: Mapping[str, Any]) -> Coalition:
        return Coalition(**{**d, "members": tuple(d["members"]),
                            "commitments": {k: tuple(v) for k, v in d["commitments"].items()},
                            "shares": dict(d["shares"]), "consented": set(d["consented"]),
                            "breaches": list(d["breaches"]), "excused": list(d["excused"])})

    def auction(d: Mapping[str, Any]) -> Auction:
        return Auction(**{**d, "pitches": {k: Pitch(**{**p, "reasons": list(p["reasons"])})
                                           for k, p in d["pitches"].items()}})

    rng = random.Random()
    rng.setstate(state["rng"])
    return World(
        task=state["task"], split=state["split"], seed=state["seed"], max_rounds=state["max_rounds"], params=params,
        rng=rng, labs={k: lab(v) for k, v in state["labs"].items()},
        blocks={k: Block(**v) for k, v in state["blocks"].items()},
        jobs={k: Job(**v) for k, v in state["jobs"].items()},
        shock_schedule=[ScheduledShock(*s) for s in state["shock_schedule"]],
        round_index=state["round_index"], offers={k: offer(v) for k, v in state["offers"].items()},
        coalitions={k: coalition(v) for k, v in state["coalitions"].items()},
        auctions={k: auction(v) for k, v in state["auctions"].items()},
        messages=[Message(*m) for m in state["messages"]],
        events=[Event(r, kind, text, dict(data)) for r, kind, text, data in state["events"]],
        done=state["done"], next_id=state["next_id"], initial_potential=dict(state["initial_potential"]),
        reward_scale=dict(state["reward_scale"]), judge_mode=state["judge_mode"], version=state["version"])


__all__ = ["MOVE_RUST_CANNOT_HOLD", "RUST_SEAT_POLICIES", "WORLD_READ", "NativeEpisode", "bind_world", "read_world",
           "world_from_state"]
