"""Policy improvement by lookahead: the live environment picks each turn's move among candidates.

For every world, the episode is played turn by turn. At each turn the seat's candidates are the
model's greedy answer, ``samples`` answers sampled from the model and ``proposals`` moves of a
scripted proposal policy (``random_valid``: valid moves with no expertise in them). Each
candidate is scored by forking the environment (:meth:`gpu_arena.GpuArenaEnv.fork`, opponents and
shocks included), playing the candidate, and letting the model finish the episode greedily: the
candidate's value is its return-to-go. The best candidate is played (the greedy one on ties), and
the next turn is searched from there.

This is the rollout algorithm of approximate policy iteration: in a deterministic world the
improved episode's return is never below the greedy episode's (the greedy candidate's value at
turn 0 *is* the greedy episode's return, and each later choice can only keep or raise the value
of the path taken). The reward is the only teacher: which move was better is what the
environment says, not what a scripted expert would do. The improved episodes then serve as
fine-tuning targets (:mod:`gpu_arena.training.rft`, ``explore="lookahead"``), so the greedy policy
moves toward what its own lookahead found.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..llm.parsing import parse_action
from .rollouts import Answer, BatchedSampler, Rollout, RolloutStats, World


@dataclass
class Improved:
    """One world's improved episode and what the greedy policy scored there."""

    rollout: Rollout
    greedy_return: float
    changed_turns: int  # turns where a candidate other than the greedy answer was played

    @property
    def gain(self) -> float:
        return self.rollout.episode_return - self.greedy_return


def _key(answer: Answer) -> str:
    """Candidates that parse to the same action are one candidate."""
    action = parse_action(answer[1] if answer[1] else answer[0])
    dump = getattr(action, "model_dump_json", None)
    return dump() if dump is not None else f"rejected:{getattr(action, 'code', '')}"


def improve(sampler: BatchedSampler, worlds: Sequence[World], *, samples: int = 3, proposals: int = 2,
            seed: int = 0) -> tuple[list[Improved], RolloutStats]:
    """Search every world's episode with one-turn lookahead (see the module docstring)."""
    started = time.perf_counter()
    stats = RolloutStats(0, 0, 0, 0, 0.0, 0.0)
    states = [sampler.start(w) for w in worlds]
    envs = [s[0] for s in states]
    convs = [s[1] for s in states]
    obs = [s[2] for s in states]
    rollouts = [Rollout(world=w, messages=c.transcript) for w, c in zip(worlds, convs, strict=True)]
    greedy_return: list[float | None] = [None] * len(worlds)
    changed = [0] * len(worlds)
    continuations = 0
    turn = 0
    while True:
        live = [i for i, o in enumerate(obs) if not o.done]
        if not live:
            break
        for i in live:
            convs[i].observe(obs[i])
        # candidates: the greedy answer first (it wins ties), then samples, then proposals; duplicates dropped
        batch = [convs[i].messages() for i in live]
        greedy = sampler.generate(batch, seed, stats, 0.0)
        cands: dict[int, list[Answer]] = {i: [g] for i, g in zip(live, greedy, strict=True)}
        if samples and sampler.temperature > 0:  # all samples of all worlds in one generate: calls cost most
            drawn = sampler.generate([m for m in batch for _ in range(samples)], seed * 7919 + turn * 131, stats,
                                     sampler.temperature)
            for j, a in enumerate(drawn):
                cands[live[j // samples]].append(a)
        for k in range(proposals):
            if sampler.proposal:
                for i in live:
                    cands[i].append(sampler.propose(envs[i], seed * 7919 + turn * 131 + 17 * k + i))
        jobs: list[tuple[int, int]] = []
        for i in live:
            seen: set[str] = set()
            unique = []
            for a in cands[i]:
                key = _key(a)
                if key not in seen:
                    seen.add(key)
                    unique.append(a)
            cands[i] = unique
            jobs.extend((i, c) for c in range(len(unique)))
        # score every candidate: fork, play it, finish greedily
        f_envs, f_convs, f_obs, f_rolls = [], [], [], []
        for i, c in jobs:
            env, conv = envs[i].fork(), copy.deepcopy(convs[i])
            roll = Rollout(world=worlds[i], messages=conv.transcript)
            f_obs.append(sampler.step(env, conv, roll, cands[i][c]))
            f_envs.append(env)
            f_convs.append(conv)
            f_rolls.append(roll)
        sampler.run(f_envs, f_convs, f_obs, f_rolls, [-1] * len(jobs), [False] * len(jobs), seed, stats)
        continuations += len(jobs)
        value: dict[tuple[int, int], float] = {job: r.episode_return for job, r in zip(jobs, f_rolls, strict=True)}
        for i in live:
            # the best candidate; the greedy answer unless another is strictly better
            best = max(range(len(cands[i])), key=lambda c, i=i: value[(i, c)])  # type: ignore[misc]
            if value[(i, best)] <= value[(i, 0)] + 1e-9:
                best = 0
            if greedy_return[i] is None:  # turn 0: the greedy candidate's value is the greedy episode
                greedy_return[i] = value[(i, 0)]
            changed[i] += best != 0
            obs[i] = sampler.step(envs[i], convs[i], rollouts[i], cands[i][best])
            stats.turns += 1
        turn += 1
    for conv, o in zip(convs, obs, strict=True):
        conv.observe(o)
    # every forked continuation is an episode played to its end (from a forked state) by the model
    stats.episodes = len(worlds) + continuations
    stats.seconds = time.perf_counter() - started
    return [Improved(r, float(g if g is not None else r.episode_return), n)
            for r, g, n in zip(rollouts, greedy_return, changed, strict=True)], stats


__all__ = ["Improved", "improve"]
