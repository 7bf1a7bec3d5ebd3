"""The arena as a TRL ``environment_factory`` environment: the seat's 14 actions are the tools.

TRL's contract (``GRPOTrainer(environment_factory=...)``, TRL 1.16): the trainer builds instances
with the factory and pools them, one per rollout. Before a rollout it calls ``reset(**row)`` with
every column of the dataset row; a returned string is appended to the prompt's last user
message. Every public method other than ``reset`` and ``get_reward`` is a tool: when the model
emits a tool call, the trainer calls the method with the call's arguments and appends the returned
string as a ``tool`` message, then lets the model continue; a rollout ends when the model answers
without a tool call, or at ``max_tool_calling_iterations`` / ``max_completion_length``. After the
rollout the trainer calls ``get_reward()`` (weight 1) and the other reward functions, which get
the instances as ``environments``.

Here ``reset`` reads ``task``, ``split`` and ``seed`` from the row — every member of a GRPO group
shares the row, hence the world, the opponents and the shocks — and returns the first turn as
:func:`gpu_arena.llm.render_turn` renders it for the agents. Each tool call is one round: the
arguments go through :func:`gpu_arena.llm.parse_action`, exactly as an agent's reply does
(unknown fields or wrong types become a :class:`~gpu_arena.llm.FormatError`, stepped as an
invalid action), and the tool's answer is the next turn, rendered with the same memory a
:class:`~gpu_arena.llm.Conversation` keeps. ``get_reward`` is the episode return: the sum of the
environment's step rewards. If the rollout ends while the episode still runs (the model answered
without a tool call, or the budget ran out), every remaining round is stepped as a
``format_no_action`` error, as an agent that keeps not answering would be; the return then holds
those penalties.

Known gap against the agents: a call to a tool name that does not exist is answered by TRL itself
("Tool ... not found") without reaching the environment, so the round does not advance; an agent
would have lost the round with ``format_unknown_action``. Such calls are counted
(``unknown_tool_calls``) and logged.

In-process by default (:class:`gpu_arena.GpuArenaEnv`); with ``env_url`` every instance holds one
WebSocket session on a GPU Arena server through :class:`gpu_arena.client.GpuArenaClient`. The wire
has no "unreadable action", so there a format error is sent as an action the rules refuse
(``accept_offer`` without an offer id): the same penalty and reward, but the next turn names the
rules' code (``missing_field``) instead of the ``format_*`` one.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Callable
from typing import Any

from ..core.types import ACTION_TYPES, REWARD_COLUMNS
from ..llm.parsing import FORMAT_NO_ACTION, FormatError, parse_action
from ..llm.prompts import RenderMemory, render_turn
from ..llm.shortform import expand
from ..llm.tools import ACTION_DESCRIPTIONS, ACTION_FIELDS, action_schema
from ..models import ArenaAction

EPISODE_OVER = "The episode is over. Reply without calling a tool."
NOT_RESET = "No episode is running."
_WIRE_INVALID = {"action_type": "accept_offer"}  # refused by the rules (missing_field): an invalid action


class _Backend:
    """One episode source: ``reset(task, split, seed, ...) -> obs`` and ``step(action) -> obs``."""

    def reset(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    def step(self, action: ArenaAction | FormatError) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _LocalBackend(_Backend):
    def __init__(self, opponents: Any, seat: str) -> None:
        from ..env import GpuArenaEnv

        self.env = GpuArenaEnv(seat=seat, opponents=opponents)

    def reset(self, **kwargs: Any) -> Any:
        return self.env.reset(**kwargs)

    def step(self, action: ArenaAction | FormatError) -> Any:
        return self.env.step(action)


class _RemoteBackend(_Backend):
    def __init__(self, url: str, opponents: Any, seat: str) -> None:
        from ..client import GpuArenaClient

        self.client = GpuArenaClient(base_url=url).sync()
        self.client.connect()
        self.defaults = {"seat": seat, **({"opponents": opponents} if opponents is not None else {})}
        # the socket closes with the instance (TRL never closes environments)
        self._finalizer = weakref.finalize(self, _close_quietly, self.client)

    def reset(self, **kwargs: Any) -> Any:
        return self.client.reset(**{**self.defaults, **kwargs}).observation

    def step(self, action: ArenaAction | FormatError) -> Any:
        payload: Any = dict(_WIRE_INVALID) if isinstance(action, FormatError) else action
        return self.client.step(payload).observation

    def close(self) -> None:
        self._finalizer()


def _close_quietly(client: Any) -> None:
    with contextlib.suppress(Exception):  # closing a socket at interpreter exit: nothing to do on failure
        client.close()


class ArenaToolEnv:
    """One seat of one GPU Arena episode per rollout, driven through tool calls (see the module
    docstring for the TRL contract and the semantics).

    After a rollout: :attr:`episode_return` (what ``get_reward`` returns), :attr:`columns` (the
    11 reward columns summed over the episode), :attr:`actions` (what the seat did each round, as
    replayable wire dicts or ``{"rejected": code}``), :attr:`turns` (rounds stepped),
    :attr:`valid_turns` (rounds whose action the rules accepted), :attr:`format_errors`,
    :attr:`unfinished` (the rollout stopped before the episode did), :attr:`unknown_tool_calls`.
    """

    def __init__(self, env_url: str | None = None, opponents: Any = None, seat: str = "lab_0") -> None:
        self._env_url = env_url
        self._opponents = opponents
        self._seat = seat
        self._backend: _Backend | None = None
        self._memory = RenderMemory()
        self._obs: Any = None
        self._reset_args: dict[str, Any] = {}
        self._clear()

    # ------------------------------------------------------------------ TRL contract

    def reset(self, **row: Any) -> str:
        """Start the episode named by the dataset row (``task``, ``split``, ``seed``; optional
        ``opponents``, ``judge_mode``); return its first turn."""
        if self._backend is None:
            self._backend = _RemoteBackend(self._env_url, self._opponents, self._seat) if self._env_url \
                else _LocalBackend(self._opponents, self._seat)
        args = {k: row[k] for k in ("task", "split", "seed", "opponents", "judge_mode") if row.get(k) is not None}
        if "seed" in args:
            args["seed"] = int(args["seed"])
        self._clear()
        self._reset_args = args
        self._obs = self._backend.reset(**args)
        self._memory = RenderMemory()
        return render_turn(self._obs, self._memory)

    def get_reward(self) -> float:
        """The episode return (after stepping any rounds the rollout left unplayed)."""
        self._finish()
        return self.episode_return

    # ------------------------------------------------------------------ results

    @property
    def episode_return(self) -> float:
        return self._return

    @property
    def columns(self) -> dict[str, float]:
        return dict(self._columns)

    @property
    def actions(self) -> list[dict[str, Any]]:
        return [dict(a) for a in self._actions]

    @property
    def reset_args(self) -> dict[str, Any]:
        return dict(self._reset_args)

    @property
    def turns(self) -> int:
        return len(self._actions)

    @property
    def valid_turns(self) -> int:
        return self._valid

    @property
    def format_errors(self) -> int:
        return self._format_errors

    @property
    def unfinished(self) -> bool:
        return self._unfinished

    @property
    def unknown_tool_calls(self) -> int:
        return self._unknown_tools

    @property
    def done(self) -> bool:
        return bool(self._obs is not None and self._obs.done)

    # ------------------------------------------------------------------ internals

    def _clear(self) -> None:
        self._return = 0.0
        self._columns = dict.fromkeys(REWARD_COLUMNS, 0.0)
        self._actions: list[dict[str, Any]] = []
        self._valid = 0
        self._format_errors = 0
        self._unfinished = False
        self._unknown_tools = 0
        self._calls_after_end = 0
        self._finished = False

    def _act(self, name: str, arguments: dict[str, Any]) -> str:
        """One tool call = one round. Never raises: TRL would answer an exception itself and the
        round would not be played."""
        if self._obs is None:
            return NOT_RESET
        if self._obs.done:
            self._calls_after_end += 1
            return EPISODE_OVER
        action = expand(parse_action({"function": {"name": name, "arguments": arguments}}), self._obs)
        self._step(action)
        return render_turn(self._obs, self._memory)

    def _step(self, action: ArenaAction | FormatError) -> None:
        assert self._backend is not None
        if isinstance(action, FormatError):
            self._format_errors += 1
            self._actions.append({"rejected": action.code, "message": action.message})
        else:
            self._actions.append(action.model_dump(mode="json", exclude_defaults=True)
                                 | {"action_type": action.action_type})
        obs = self._backend.step(action)
        self._obs = obs
        self._return += float(obs.reward or 0.0)
        for c in REWARD_COLUMNS:
            self._columns[c] += float(obs.reward_breakdown.get(c, 0.0))
        if obs.last_action_result.ok:
            self._valid += 1

    def _finish(self) -> None:
        """Play out the rounds the rollout left: each one a ``format_no_action`` error."""
        if self._finished or self._obs is None:
            return
        self._finished = True
        if not self._obs.done:
            self._unfinished = True
        while not self._obs.done:
            self._step(FormatError(FORMAT_NO_ACTION, "no tool call: the rollout ended before the episode"))


# The 14 tools. Each takes any keyword arguments (what the model sent goes to the parser, which
# judges it as it judges an agent's reply); its visible signature and docstring are the action's
# fields, so transformers' get_json_schema gives a usable schema should the class be used
# without the exact tool list (the trainer here shows the model gpu_arena.llm.action_tools()).
_PY_TYPES: dict[str, Any] = {"array": list, "number": float, "integer": int, "string": str, "object": dict,
                             "boolean": bool}


def _tool(name: str) -> Callable[..., str]:
    def tool(self: ArenaToolEnv, **arguments: Any) -> str:
        return self._act(name, arguments)

    schema = action_schema(name)
    params = []
    annotations: dict[str, Any] = {"return": str}
    lines = []
    for field_name, prop in schema["properties"].items():
        kind = _PY_TYPES.get(str(prop.get("type")), str)
        annotations[field_name] = kind | None
        params.append(inspect.Parameter(field_name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation=kind | None))
        lines.append(f"    {field_name}: {prop.get('description') or field_name}")
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = ACTION_DESCRIPTIONS[name] + ("\n\nArgs:\n" + "\n".join(lines) if lines else "") + \
        "\n\nReturns:\n    The next turn: the result of the action and the seat's new state."
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *params], return_annotation=str)
    tool.__annotations__ = annotations
    return tool


for _name in ACTION_TYPES:
    assert set(ACTION_FIELDS[_name]) == set(action_schema(_name)["properties"])
    setattr(ArenaToolEnv, _name, _tool(_name))


# ---------------------------------------------------------------------- reward columns for the trainer

def reward_functions() -> list[Callable[..., list[float]]]:
    """Reward functions for ``GRPOTrainer(reward_funcs=...)``, to be given weight 0: one per reward
    column (the column summed over the episode) and ``valid_action_rate``, so each is logged as
    ``rewards/<name>/mean`` beside the environment's own ``get_reward`` column. The last one also
    logs ``arena/*`` metrics and, per rollout, the world and the actions (``log_extra``)."""

    def column(name: str) -> Callable[..., list[float]]:
        def fn(environments: list[ArenaToolEnv], **_: Any) -> list[float]:
            for env in environments:
                env._finish()
            return [env.columns[name] for env in environments]

        fn.__name__ = fn.__qualname__ = name
        return fn

    def valid_action_rate(environments: list[ArenaToolEnv], completions: list[Any] | None = None,
                          log_metric: Callable[[str, float], None] | None = None,
                          log_extra: Callable[[str, list[Any]], None] | None = None, **_: Any) -> list[float]:
        for env in environments:
            env._finish()
        if completions is not None:
            count_unknown_tool_calls(environments, completions)
        rates = [env.valid_turns / env.turns if env.turns else 0.0 for env in environments]
        if log_metric is not None and environments:
            n = len(environments)
            turns = sum(env.turns for env in environments) or 1
            log_metric("arena/valid_action_rate", sum(env.valid_turns for env in environments) / turns)
            log_metric("arena/format_error_rate", sum(env.format_errors for env in environments) / turns)
            log_metric("arena/unfinished_rate", sum(env.unfinished for env in environments) / n)
            log_metric("arena/unknown_tool_calls", sum(env.unknown_tool_calls for env in environments) / n)
            log_metric("arena/episode_return", sum(env.episode_return for env in environments) / n)
            log_metric("arena/episodes", float(n))
        if log_extra is not None:
            log_extra("arena_world", [env.reset_args for env in environments])
            log_extra("arena_actions", [env.actions for env in environments])
        return rates

    return [*(column(c) for c in REWARD_COLUMNS), valid_action_rate]


def count_unknown_tool_calls(environments: list[ArenaToolEnv], completions: list[list[dict[str, Any]]]) -> None:
    """Record, per rollout, the tool calls to names that are not actions: TRL answers them itself
    and they never reach the environment."""
    for env, messages in zip(environments, completions, strict=False):
        if isinstance(messages, list):
            env._unknown_tools = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool"
                                     and m.get("name") not in ACTION_TYPES)


__all__ = ["EPISODE_OVER", "ArenaToolEnv", "count_unknown_tool_calls", "reward_functions"]
