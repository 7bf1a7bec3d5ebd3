"""Which engine plays an episode, and why the Python core does where it does (issue 30, item 3).

:class:`EngineReport` is one small value: who plays the episode now (``rust`` or ``python``), why
the Python core plays it (None while Rust does), whether it moved there from Rust part way, and
how many of its rounds Rust played. ``GpuArenaEnv.engine_report()`` gives it; the environment puts
it in every observation's ``metadata["engine"]`` and in its ``state`` (``ArenaState.engine``);
evaluation rows (``EpisodeResult.engine``, ``engine_reason``), rollouts and league matches record
it, and the benches print the counts (:func:`engine_counts`).

The reasons are fixed strings, so rows can be counted by them:

* why an episode **moved** from Rust to the Python core (:data:`MOVE_REASONS`; the episode's
  ``moved_reason``): a caller took the live world (:data:`WORLD_READ`), a policy that plans with
  the whole world was bound to it (:data:`POLICY_BOUND`), a move Rust cannot hold
  (:data:`MOVE_RUST_CANNOT_HOLD`), a replay of recorded moves (:data:`REPLAYED`), or a caller
  asked (:data:`ASKED`);
* why the Python core played it **from the start** (:data:`START_REASONS`): the environment's
  ``engine='python'`` (:data:`ENGINE_PYTHON`), a model judge (:data:`MODEL_JUDGE`), a seat Rust does
  not play (:data:`PYTHON_OPPONENTS`), every seat driven from outside (:data:`EVERY_SEAT_DRIVEN`:
  the league), a restored snapshot that holds no Rust fork (:data:`RESTORED`), or no Rust engine
  here: :data:`NO_RUST` followed by the loader's words (not built, stale: ``StaleTwinWarning``).

Reading the world does not move an episode: ``NativeEpisode.world_view()`` builds a copy.

Imports nothing outside the standard library: the wire models, the client and the benches read it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

RUST = "rust"
PYTHON = "python"

# why a Rust-played episode moved to the Python core (NativeEpisode.moved_reason)
WORLD_READ = "world read"  # a caller took episode.world, the live world it may hold or change
POLICY_BOUND = "policy bound to the world"  # a policy that plans with the whole world (the oracle)
MOVE_RUST_CANNOT_HOLD = "move Rust cannot hold"  # an int beyond 64 bits, a lone surrogate, an object
REPLAYED = "replay of recorded moves"  # a server session replaying a stored episode steps every seat
ASKED = "asked"  # NativeEpisode.to_python() called without a reason
MOVE_REASONS = (WORLD_READ, POLICY_BOUND, MOVE_RUST_CANNOT_HOLD, REPLAYED, ASKED)

# why the Python core played an episode from its start
ENGINE_PYTHON = "engine='python'"  # GpuArenaEnv(engine="python") or $GPU_ARENA_ENGINE=python
MODEL_JUDGE = "a model judge is scored in Python"
PYTHON_OPPONENTS = "Rust plays only the world's archetypes and random_valid opponents"
EVERY_SEAT_DRIVEN = "every seat driven from outside"  # the league: each seat an entrant's policy
RESTORED = "restored from a snapshot without a Rust fork"
NO_RUST = "no Rust engine"  # followed by ": " and the loader's reason (not built, stale twin, ...)
START_REASONS = (ENGINE_PYTHON, MODEL_JUDGE, PYTHON_OPPONENTS, EVERY_SEAT_DRIVEN, RESTORED, NO_RUST)


@dataclass(frozen=True, slots=True)
class EngineReport:
    """Who plays an episode and why.

    ``playing``: ``rust`` or ``python``, the engine playing it now. ``reason``: why the Python core
    plays it (one of :data:`MOVE_REASONS` when ``moved``, else of :data:`START_REASONS`, or
    :data:`NO_RUST` with the loader's words); None while Rust plays. ``moved``: it started in Rust
    and moved. ``rust_rounds``: the rounds Rust played."""

    playing: str
    reason: str | None = None
    moved: bool = False
    rust_rounds: int = 0

    @property
    def moved_reason(self) -> str | None:
        """Why it moved from Rust to the Python core (None: it did not)."""
        return self.reason if self.moved else None

    def to_dict(self) -> dict[str, Any]:
        """The report as the wire carries it (``metadata["engine"]``, ``state.engine``)."""
        return {"playing": self.playing, "reason": self.reason, "moved": self.moved, "rust_rounds": self.rust_rounds}

    @classmethod
    def from_dict(cls, data: Any) -> EngineReport | None:
        """The report :meth:`to_dict` wrote, or None for anything else (a server that sends none)."""
        if not isinstance(data, dict) or data.get("playing") not in (RUST, PYTHON):
            return None
        reason = data.get("reason")
        return cls(str(data["playing"]), reason if isinstance(reason, str) else None, bool(data.get("moved")),
                   int(data.get("rust_rounds") or 0))


def rust_report(rust_rounds: int) -> EngineReport:
    return EngineReport(RUST, None, False, rust_rounds)


def engine_counts(played: Iterable[EngineReport | tuple[str, str | None] | None]) -> dict[str, Any]:
    """How many episodes each engine played, and why Python played the rest: ``played`` holds
    each episode's :class:`EngineReport` or ``(engine, reason)`` pair (a row's ``engine`` and
    ``engine_reason``). ``{"rust": n, "python": m, "python_reasons": {reason: count}}``, the
    reasons most frequent first (an episode with no report counts as ``unknown``)."""
    engines: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for item in played:
        engine, reason = (item.playing, item.reason) if isinstance(item, EngineReport) else item or ("", None)
        engines[engine or "unknown"] += 1
        if engine != RUST:
            reasons[reason or "unknown"] += 1
    out: dict[str, Any] = {RUST: engines.pop(RUST, 0), PYTHON: engines.pop(PYTHON, 0), **dict(engines)}
    out["python_reasons"] = dict(reasons.most_common())
    return out


def engine_line(counts: dict[str, Any]) -> str:
    """One line for a person: ``engine: rust (1188 episodes), python (12: policy bound to the world 12)``."""
    def plural(n: int) -> str:
        return f"{n} episode{'' if n == 1 else 's'}"

    parts = [f"rust ({plural(counts.get(RUST, 0))})"]
    python = counts.get(PYTHON, 0)
    reasons = counts.get("python_reasons") or {}
    why = ", ".join(f"{r} {n}" for r, n in reasons.items())
    parts.append(f"python ({plural(python)}{': ' + why if python and why else ''})")
    parts += [f"{k} ({plural(v)})" for k, v in counts.items() if k not in (RUST, PYTHON, "python_reasons")]
    return "engine: " + ", ".join(parts)


__all__ = ["ASKED", "ENGINE_PYTHON", "EVERY_SEAT_DRIVEN", "MODEL_JUDGE", "MOVE_REASONS", "MOVE_RUST_CANNOT_HOLD",
           "NO_RUST", "POLICY_BOUND", "PYTHON", "PYTHON_OPPONENTS", "REPLAYED", "RESTORED", "RUST", "START_REASONS",
           "WORLD_READ", "EngineReport", "engine_counts", "engine_line", "rust_report"]
