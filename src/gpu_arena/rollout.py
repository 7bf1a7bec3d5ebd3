"""The one loop that plays a seat of an episode to its end.

Evaluation, SFT data, the lookahead's finisher, the CLI's ``demo`` and ``play`` and the behaviour
fingerprint all drive the controlled seat of a :class:`~gpu_arena.env.GpuArenaEnv` the same way:
each round the seat's policy observes through :func:`~gpu_arena.core.policy.seat_view` (bound to
the world if it plans with it, which moves a Rust-played episode to the Python core, saying so:
:func:`~gpu_arena.native.episode.bind_world`; without decision aids if it does not read them), its action is
stepped, and the reward and its columns are summed. Callers that do more per turn (render the
action as a chat, ask a person, print a row) pass ``choose`` and ``on_step`` instead of writing
the loop again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .core.policy import seat_view
from .core.types import REWARD_COLUMNS
from .env import GpuArenaEnv
from .models import ArenaObservation
from .native.episode import bind_world


@dataclass(slots=True)
class SeatReturn:
    """What a seat earned over the turns played: the summed reward, each reward column's sum, the
    number of steps, and the last observation."""

    episode_return: float = 0.0
    columns: dict[str, float] = field(default_factory=lambda: dict.fromkeys(REWARD_COLUMNS, 0.0))
    steps: int = 0
    last: ArenaObservation | None = None

    def add(self, obs: ArenaObservation) -> None:
        self.episode_return += obs.reward or 0.0
        self.steps += 1
        for c in REWARD_COLUMNS:
            self.columns[c] += obs.reward_breakdown[c]
        self.last = obs


# choose(view, observation) -> the action to step, or None to stop early (a person quit)
Choose = Callable[[Any, ArenaObservation | None], Any]


def play_seat(env: GpuArenaEnv, policy: Any, first: ArenaObservation | None = None, *,
              choose: Choose | None = None,
              on_step: Callable[[Any, ArenaObservation], None] | None = None) -> SeatReturn:
    """Play ``env``'s controlled seat until the episode ends, from where it stands (``first``: the
    observation ``reset`` or the last step returned, handed to ``choose``). ``policy`` decides
    from its seat view unless ``choose`` is given (it gets the view and the current observation,
    and may return None to stop); ``on_step(action, observation)`` is told every stepped action
    and what came back."""
    episode = env.episode
    if episode is None:
        raise RuntimeError("reset the environment before playing it")
    totals = SeatReturn(last=first)
    obs = first
    while not episode.done:
        bind_world(episode, policy)  # a policy that plans with the world moves a Rust episode, saying why
        view = seat_view(policy, episode, env.seat)
        action = choose(view, obs) if choose is not None else policy.act(view)
        if action is None:
            break
        obs = env.step(action)
        totals.add(obs)
        if on_step is not None:
            on_step(action, obs)
    return totals


__all__ = ["Choose", "SeatReturn", "play_seat"]
