"""A fingerprint of the environment's behaviour, to show that a refactor changed none of it.

Plays the scripted baselines in seat ``lab_0`` over holdout worlds of every task (the holdout
table's rows), and hashes three things separately (SHA-256 of canonical JSON):

- ``rows``: every evaluation row (return, reward columns, welfare, deal and breach rates, ...);
- ``observations``: every seat's view (with and without decision aids) after every step, and the
  controlled seat's wire observation;
- ``transcripts``: every episode's transcript and per-lab returns.

Run it before and after a change: equal hashes mean no behaviour changed. Prints JSON; decision
0021 records the hashes of the redesign. Usage: ``python bench/fingerprint.py [--seeds N]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import time
from typing import Any

from gpu_arena.core.types import TASKS
from gpu_arena.env import GpuArenaEnv
from gpu_arena.evaluation.runner import episode_result, world_optimum
from gpu_arena.native.report import engine_counts
from gpu_arena.policies import BASELINES, make_policy
from gpu_arena.rollout import play_seat


def _plain(value: Any) -> Any:
    """JSON-ready form of views and results: dataclasses as dicts, tuples and sets as lists (so a
    representation change alone — a list become a tuple — does not change the hash)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_plain(v) for v in value)
    if isinstance(value, float):
        return round(value, 9)
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump(mode="json"))
    return value


class _Hash:
    def __init__(self) -> None:
        self.h = hashlib.sha256()

    def add(self, value: Any) -> None:
        self.h.update(json.dumps(_plain(value), sort_keys=True).encode())

    def hex(self) -> str:
        return self.h.hexdigest()


def fingerprint(seeds: int = 3) -> dict[str, Any]:
    rows, observations, transcripts = _Hash(), _Hash(), _Hash()
    episodes = rounds = in_rust = 0
    played_by: list[tuple[str, str | None]] = []  # each episode's engine and why Python played it
    t0 = time.perf_counter()
    for task in TASKS:
        for seed in range(seeds):
            optimum = world_optimum(task, "holdout", seed)[1]
            rows.add({"task": task, "seed": seed, "optimum": optimum})
            for policy in BASELINES:
                env = GpuArenaEnv(task=task, split="holdout")
                first = env.reset(seed=seed)
                episode = env.episode
                assert episode is not None
                # the labs, read from the state (reading episode.world would move a Rust-played
                # episode to the Python core: decision 0026)
                labs = sorted(lab["lab_id"] for lab in env.state.world["labs"])

                def record(_action: Any, obs: Any, episode: Any = episode, labs: list[str] = labs) -> None:
                    wire = obs.model_dump(mode="json")
                    wire.get("metadata", {}).pop("episode_id", None)  # a fresh UUID per episode
                    # which engine plays (issue 30): bookkeeping added after the baseline, not behaviour
                    wire.get("metadata", {}).pop("engine", None)
                    observations.add(wire)
                    for lab in labs:
                        observations.add(episode.observe(lab))
                        observations.add(episode.observe(lab, aids=False))

                played = play_seat(env, make_policy(policy, seed=seed), first, on_step=record)
                result = episode_result(env, policy, task, "holdout", seed, episode_return=played.episode_return,
                                        columns=played.columns, steps=played.steps, optimum=optimum,
                                        keep_replay=False)
                # seat_returns came after the baseline (issue #18): a new field of the row, not a change
                # of behaviour; every seat's return is in the transcripts' hash already
                row = _plain(dataclasses.replace(result, replay=None, llm_usage=None))
                row.pop("seat_returns")
                # so did the engine that played it and why (issue 30): counted in "engines" below
                row.pop("engine")
                row.pop("engine_reason")
                rows.add(row)
                played_by.append((result.engine, result.engine_reason))
                transcripts.add({"transcript": episode.transcript, "returns": episode.returns})
                episodes += 1
                # rounds played in Rust (a seat bound to the world moves its episode to Python)
                rounds += len(episode.transcript)
                report = env.engine_report()
                in_rust += report.rust_rounds if report is not None else 0
    return {"episodes": episodes, "seconds": round(time.perf_counter() - t0, 1), "engine": GpuArenaEnv().engine,
            "engines": engine_counts(played_by), "rounds": rounds, "rounds_in_rust": in_rust, "rows": rows.hex(),
            "observations": observations.hex(), "transcripts": transcripts.hex()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="holdout seeds per task (0..N-1)")
    print(json.dumps(fingerprint(parser.parse_args().seeds), indent=2))


if __name__ == "__main__":
    main()
