"""Server settings, read from ``GPU_ARENA_*`` environment variables (a frozen dataclass, no extra dependency)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Everything the server can be told, each field with its ``GPU_ARENA_<FIELD>`` variable.

    Contract: defaults are safe for a public deployment (no god view, bounded sessions and
    payloads); a malformed variable fails at start-up with a message naming it, never later.

    Fields:
        host, port: where ``gpu-arena serve`` listens (``127.0.0.1:8000``).
        max_sessions: the cap on concurrent WebSocket sessions, and separately on REST sessions.
        idle_timeout_s: a session with no request for this long is closed (WebSocket sessions by
            OpenEnv's reaper, whose sweep runs every ``max(idle_timeout_s / 4, 5)`` s; REST sessions
            are checked on every access and swept every ``reaper_interval_s``).
        reaper_interval_s: how often the REST reaper sweeps.
        god_view: expose every lab's private values in ``state`` (WebSocket ``state`` message and
            ``GET /api/sessions/{id}/state``). Off by default; for local debugging only.
        max_body_bytes: the largest HTTP request body or WebSocket frame accepted; bigger ones get
            413 (HTTP) or a structured error frame (WebSocket), and the session stays open.
        max_json_depth: the deepest JSON nesting accepted in a body or frame (the arena's actions
            nest at most three levels; deep nesting is only ever an attack on the parser).
        db: the SQLite store for finished episodes (default ``.arena/arena.db`` or ``GPU_ARENA_DB``).
        store_episodes: write finished episodes to the store (replays at ``/api/episodes/{id}``).
        tombstones: how many closed or expired REST session ids are remembered, so that they
            answer 410 (gone) rather than 404 (never existed).
        ws_compression: negotiate per-message deflate on WebSockets (off: it costs more CPU than
            it saves on a local network).
        gc_freeze: ``serve`` moves what start-up imported and built out of the garbage collector's
            generations (``gc.freeze``) before serving, which keeps full collections (they pause
            every session) short under load (decision 0008). ``GPU_ARENA_GC_FREEZE=0`` turns it off.
        auto_eval: when the store holds no evaluation run, start a quick real one in the
            background at start-up (a subprocess running ``gpu-arena eval``), so that a first
            visitor sees real numbers. Off here (a library, the tests); ``gpu-arena serve`` turns
            it on unless ``GPU_ARENA_AUTO_EVAL=0`` or ``--no-auto-eval``.
        auto_eval_policies, auto_eval_tasks, auto_eval_splits: comma-separated lists for it.
        auto_eval_seeds: seeds 0..N-1 per task and split.
        auto_eval_timeout_s: the whole background evaluation is stopped after this long.
        judge: who adds an opinion to the rule judge in sessions reset with ``judge_mode="rule"``:
            ``rule`` (nobody; the default) or an LLM judge ``llm:openai:<model>@<base_url>[?...]``
            (``gpu_arena.llm.judge``; its key from ``OPENAI_API_KEY`` or the variable named by
            ``api_key_env``). The operator's choice only: clients cannot name an endpoint for the
            server to call.
        model_seats: let a client put a language model in a match's seat (``llm:openai:...@URL``,
            ``llm:hf:DIR``): the server then calls the endpoint or loads the checkpoint the client
            names. Off by default (such a seat is refused with ``policy_not_allowed``); for a
            trusted network only.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    max_sessions: int = 64
    idle_timeout_s: float = 600.0
    reaper_interval_s: float = 1.0
    god_view: bool = False
    max_body_bytes: int = 64 * 1024
    max_json_depth: int = 32
    db: str | None = None
    store_episodes: bool = True
    tombstones: int = 4096
    ws_compression: bool = False
    gc_freeze: bool = True
    auto_eval: bool = False
    auto_eval_policies: str = "rule_expert,oracle,no_negotiation,random_valid,greedy_hoarder,always_accept"
    auto_eval_tasks: str = "single_trade,market_round,coalition_market"
    auto_eval_splits: str = "holdout,train"
    auto_eval_seeds: int = 8
    auto_eval_timeout_s: float = 300.0
    judge: str | None = None
    model_seats: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        for name in ("max_sessions", "max_body_bytes", "max_json_depth", "tombstones", "auto_eval_seeds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("idle_timeout_s", "reaper_interval_s", "auto_eval_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.judge not in (None, "rule"):
            from ..llm.judge import make_judge

            make_judge(str(self.judge))  # a malformed judge name fails at start-up, not at the first auction

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ServerSettings:
        """Defaults, then ``GPU_ARENA_*`` variables, then explicit ``overrides`` (None values are ignored)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            var = f"GPU_ARENA_{f.name.upper()}"
            if var not in env:
                continue
            raw = env[var]
            kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
            try:
                if kind == "bool":
                    values[f.name] = _parse_bool(var, raw)
                elif kind == "int":
                    values[f.name] = int(raw)
                elif kind == "float":
                    values[f.name] = float(raw)
                else:
                    values[f.name] = raw or None
            except ValueError as e:
                raise ValueError(f"{var}: {e}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_(self, **changes: Any) -> ServerSettings:
        return replace(self, **changes)
