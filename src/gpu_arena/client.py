"""GpuArenaClient: the arena over OpenEnv's WebSocket protocol, typed with the arena's wire models.

It depends on the wire models only, never on the server or the environment, so a trainer can
talk to a remote arena without the simulation code running in its process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult

from .models import ArenaAction, ArenaObservation, ArenaState


def action_payload(action: ArenaAction | Mapping[str, Any] | Any) -> dict[str, Any]:
    """The JSON the server's ``step`` expects, from an :class:`ArenaAction`, a mapping, or any
    dataclass with the action's fields (a core ``Action``, which the scripted policies return)."""
    if isinstance(action, ArenaAction):
        return action.model_dump(mode="json", exclude_defaults=True) | {"action_type": action.action_type}
    if isinstance(action, Mapping):
        return dict(action)
    if dataclasses.is_dataclass(action) and not isinstance(action, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(action):
            value = getattr(action, f.name)
            if f.name == "action_type" or value not in (None, (), {}):
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out
    raise TypeError(f"cannot send {type(action).__name__} as an action; use ArenaAction or a dict")


class GpuArenaClient(EnvClient[ArenaAction, ArenaObservation, ArenaState]):
    """A client for one isolated arena session on a GPU Arena server (``ws://host:port/ws``).

    Contract: one client is one server-side environment, for as long as its connection lives;
    ``reset(**kwargs)`` takes the server's reset arguments (``task``, ``split``, ``seed``, ``seat``,
    ``opponents``, ``judge_mode``, ``episode_id``); ``step(action)`` takes an :class:`ArenaAction`,
    a dict, or a core ``Action``; both return a ``StepResult`` whose ``observation`` is an
    :class:`ArenaObservation`. A refused message (capacity reached, invalid reset arguments, a
    mistyped action) raises ``RuntimeError`` with the server's error code; a well-typed action the
    rules refuse is not an error but an observation with ``last_action_result.ok == False``.

    Async by default, sync through ``.sync()``::

        async with GpuArenaClient(base_url="http://127.0.0.1:8000") as env:
            result = await env.reset(task="market_round", seed=3)
            result = await env.step(ArenaAction(action_type="wait"))

        with GpuArenaClient(base_url="http://127.0.0.1:8000").sync() as env:
            result = env.reset(seed=3)
    """

    def _step_payload(self, action: ArenaAction | Mapping[str, Any] | Any) -> dict[str, Any]:
        return action_payload(action)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ArenaObservation]:
        fields = dict(payload.get("observation") or {})
        fields["reward"] = payload.get("reward")
        fields["done"] = bool(payload.get("done", False))
        if "metadata" in payload:
            fields["metadata"] = payload["metadata"]
        observation = ArenaObservation.model_validate(fields)
        return StepResult(observation=observation, reward=observation.reward, done=observation.done,
                          metadata=payload.get("metadata"))

    def _parse_state(self, payload: dict[str, Any]) -> ArenaState:
        return ArenaState.model_validate(payload)


__all__ = ["GpuArenaClient", "action_payload"]
