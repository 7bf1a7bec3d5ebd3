"""Run policies in the controlled seat over tasks and seeds, on a process pool.

One job is one (task, split, seed) with every policy: the world and its exact welfare optimum are
built once per job, and every policy meets the same opponents on the same world. Results do not
depend on the number of workers or the order jobs finish in: rows are sorted before they are
returned.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.engine import world_fingerprint
from ..core.types import REWARD_COLUMNS
from ..core.valuation import social_optimum
from ..core.worldgen import generate_world
from ..env import GpuArenaEnv
from ..policies import make_policy


@dataclass(slots=True)
class EpisodeResult:
    """One policy's episode: its return, reward columns, episode metrics and (optionally) replay."""

    policy: str
    task: str
    split: str
    seed: int
    episode_return: float
    columns: dict[str, float]
    steps: int
    welfare: float
    optimum: float
    welfare_ratio: float
    surplus_over_batna: float
    deal_rate: float
    breach_rate: float
    invalid_rate: float
    invalid_actions: int
    replay: dict[str, Any] | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def play_episode(policy: str, task: str, split: str, seed: int, *, opponents: Any = None,
                 keep_replay: bool = False, optimum: float | None = None) -> EpisodeResult:
    """Play one episode with ``policy`` in seat lab_0 against the world's opponents."""
    env = GpuArenaEnv(task=task, split=split, opponents=opponents)
    obs = env.reset(seed=seed)
    episode = env.episode
    assert episode is not None
    driver = make_policy(policy, seed=seed)
    sums = dict.fromkeys(REWARD_COLUMNS, 0.0)
    total, steps = 0.0, 0
    while not obs.done:
        if getattr(driver, "needs_world", False):
            driver.bind(episode.world)  # type: ignore[attr-defined]
        view = episode.observe("lab_0", aids=getattr(driver, "uses_aids", True))
        obs = env.step(driver.act(view))
        total += obs.reward or 0.0
        steps += 1
        for c in REWARD_COLUMNS:
            sums[c] += obs.reward_breakdown[c]
    metrics = env.metrics(optimum)
    me = metrics["labs"]["lab_0"]
    replay = None
    if keep_replay:
        replay = {"task": task, "split": split, "seed": seed, "policy": policy, "seat": "lab_0",
                  "transcript": episode.transcript}
    return EpisodeResult(
        policy=policy, task=task, split=split, seed=seed, episode_return=total, columns=sums, steps=steps,
        welfare=metrics["welfare"], optimum=metrics["optimum"], welfare_ratio=metrics["welfare_ratio"],
        surplus_over_batna=me["surplus_over_batna"], deal_rate=me["deal_rate"], breach_rate=me["breach_rate"],
        invalid_rate=me["invalid_rate"], invalid_actions=episode.world.labs["lab_0"].invalid_actions,
        replay=replay)


Optima = dict[tuple[str, str, int], tuple[str, float]]  # (task, split, seed) -> (world fingerprint, optimum)


def _job(policies: Sequence[str], task: str, split: str, seed: int, keep_replay: bool,
         cached: tuple[str, float] | None) -> tuple[list[EpisodeResult], tuple[str, float]]:
    world = generate_world(task, split, seed)
    fingerprint = world_fingerprint(world)
    if cached is not None and cached[0] == fingerprint:
        optimum = cached[1]
    else:
        optimum = social_optimum(list(world.blocks.values()), list(world.jobs.values()))
    results = [play_episode(p, task, split, seed, keep_replay=keep_replay, optimum=optimum) for p in policies]
    return results, (fingerprint, optimum)


def run_evaluation(policies: Sequence[str], tasks: Sequence[str], split: str, seeds: Sequence[int], *,
                   workers: int = 1, keep_replays: bool = False, optima: Optima | None = None,
                   progress: Callable[[int], None] | None = None) -> list[EpisodeResult]:
    """Every policy × task × seed. ``progress`` is called with the number of episodes just finished.

    ``optima`` caches the exact welfare optimum per world (it costs up to seconds a world); it is
    read, and filled with what this run computed.
    """
    for p in policies:
        make_policy(p)  # fail fast on an unknown name, before any worker starts
    optima = optima if optima is not None else {}
    jobs = [(task, seed) for task in tasks for seed in seeds]
    results: list[EpisodeResult] = []

    def collect(task: str, seed: int, out: tuple[list[EpisodeResult], tuple[str, float]]) -> None:
        episodes, optimum = out
        results.extend(episodes)
        optima[(task, split, seed)] = optimum
        if progress:
            progress(len(policies))

    if workers <= 1:
        for task, seed in jobs:
            collect(task, seed, _job(policies, task, split, seed, keep_replays, optima.get((task, split, seed))))
    else:
        with ProcessPoolExecutor(max_workers=min(workers, os.cpu_count() or 1, len(jobs) or 1)) as pool:
            futures = {pool.submit(_job, list(policies), task, split, seed, keep_replays,
                                   optima.get((task, split, seed))): (task, seed) for task, seed in jobs}
            for fut in as_completed(futures):
                collect(*futures[fut], fut.result())
    order = {p: i for i, p in enumerate(policies)}
    tasks_order = {t: i for i, t in enumerate(tasks)}
    results.sort(key=lambda r: (tasks_order[r.task], order[r.policy], r.seed))
    return results


__all__ = ["EpisodeResult", "play_episode", "run_evaluation"]
