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

Variants (decision 0020 measures each): the forked episodes can be finished by a scripted policy
instead of the model (``finisher``: a candidate is then valued by that policy's return-to-go, and
no model time goes into the continuations); the episode can go on with the model's own answer
instead of the best one (``roll_in="greedy"``: the states labelled are those the model reaches,
as in DAgger), with ties going to the proposal's move (``prefer="proposal"``); and each changed
turn is kept as a prompt-completion record (:func:`correction_record`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..llm.parsing import FormatError, parse_action
from .rollouts import Answer, BatchedSampler, Rollout, RolloutStats, World


@dataclass
class Improved:
    """One world's improved episode and what the greedy policy scored there."""

    rollout: Rollout
    greedy_return: float
    # (the conversation as the model saw it at that turn, the best candidate) for every turn where a
    # readable candidate other than the greedy answer was best
    corrections: list[tuple[list[dict[str, Any]], Answer]] = field(default_factory=list)

    @property
    def changed_turns(self) -> int:
        return len(self.corrections)

    @property
    def gain(self) -> float:
        return self.rollout.episode_return - self.greedy_return


def _key(answer: Answer) -> str:
    """Candidates that parse to the same action are one candidate."""
    action = parse_action(answer[1] if answer[1] else answer[0])
    dump = getattr(action, "model_dump_json", None)
    return dump() if dump is not None else f"rejected:{getattr(action, 'code', '')}"


def finish_with(policy: str, env: Any, seat: str, seed: int) -> float:
    """Play ``env``'s episode to its end with the scripted ``policy`` in ``seat`` (the environment's
    controlled seat); the return-to-go."""
    from ..policies import make_policy
    from ..rollout import play_seat

    assert env.seat == seat
    return play_seat(env, make_policy(policy, seed=seed)).episode_return


def improve(sampler: BatchedSampler, worlds: Sequence[World], *, samples: int = 3, proposals: int = 2,
            seed: int = 0, finisher: str | None = None, roll_in: str = "best", prefer: str = "greedy"
            ) -> tuple[list[Improved], RolloutStats]:
    """Search every world's episode with one-turn lookahead (see the module docstring).

    ``finisher``: a scripted policy that finishes the forked episodes instead of the model, so a
    candidate's value is its return-to-go under that policy (the rollout algorithm with the
    scripted policy as its base: the chosen move is at least as good as the base policy's own
    move, when that move is a candidate). No model time goes into the continuations then.

    ``roll_in``: which move each episode goes on with, ``best`` (the best candidate: the improved
    episode) or ``greedy`` (the model's own answer, so the next turns are searched in the states the
    model itself reaches, as DAgger collects its labels). ``prefer``: who wins a tie, ``greedy`` (the
    model's answer, unless another candidate is strictly better) or ``proposal`` (the first proposal
    move, unless the greedy answer or a sample is strictly better)."""
    if roll_in not in ROLL_IN or prefer not in PREFER:
        raise ValueError(f"roll_in must be one of {ROLL_IN} and prefer one of {PREFER}")
    started = time.perf_counter()
    stats = RolloutStats(0, 0, 0, 0, 0.0, 0.0)
    states = [sampler.start(w) for w in worlds]
    envs = [s[0] for s in states]
    convs = [s[1] for s in states]
    obs = [s[2] for s in states]
    rollouts = [Rollout(world=w, messages=c.transcript) for w, c in zip(worlds, convs, strict=True)]
    greedy_return: list[float | None] = [None] * len(worlds)
    corrections: list[list[tuple[list[dict[str, Any]], Answer]]] = [[] for _ in worlds]
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
        grammars = sampler.grammars([envs[i] for i in live])
        greedy = sampler.generate(batch, seed, stats, 0.0, grammars)
        cands: dict[int, list[Answer]] = {i: [g] for i, g in zip(live, greedy, strict=True)}
        if samples and sampler.temperature > 0:  # all samples of all worlds in one generate: calls cost most
            drawn = sampler.generate([m for m in batch for _ in range(samples)], seed * 7919 + turn * 131, stats,
                                     sampler.temperature, [x for x in grammars for _ in range(samples)] if grammars else None)
            for j, a in enumerate(drawn):
                cands[live[j // samples]].append(a)
        first_proposal: dict[int, str] = {}
        for k in range(proposals):
            if sampler.proposal:
                for i in live:
                    cands[i].append(sampler.propose(envs[i], seed * 7919 + turn * 131 + 17 * k + i))
                    first_proposal.setdefault(i, _key(cands[i][-1]))
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
        if finisher:
            for env, o, roll in zip(f_envs, f_obs, f_rolls, strict=True):
                if not o.done:
                    roll.episode_return += finish_with(finisher, env, sampler.seat, seed + turn)
        else:
            sampler.run(f_envs, f_convs, f_obs, f_rolls, [-1] * len(jobs), [False] * len(jobs), seed, stats)
            continuations += len(jobs)
        value: dict[tuple[int, int], float] = {job: r.episode_return for job, r in zip(jobs, f_rolls, strict=True)}
        for i in live:
            # the best candidate; the greedy answer unless another is strictly better
            best = max(range(len(cands[i])), key=lambda c, i=i: value[(i, c)])  # type: ignore[misc]
            default = 0
            if prefer == "proposal" and i in first_proposal:
                default = next(c for c, a in enumerate(cands[i]) if _key(a) == first_proposal[i])
            if value[(i, best)] <= value[(i, default)] + 1e-9:
                best = default
            if greedy_return[i] is None:  # turn 0: the greedy candidate's value is the greedy episode
                greedy_return[i] = value[(i, 0)]
            if best != 0 and not isinstance(parse_action(cands[i][best][1] or cands[i][best][0]), FormatError):
                corrections[i].append((copy.deepcopy(convs[i].messages()), cands[i][best]))
            obs[i] = sampler.step(envs[i], convs[i], rollouts[i], cands[i][best if roll_in == "best" else 0])
            stats.turns += 1
        turn += 1
    for conv, o in zip(convs, obs, strict=True):
        conv.observe(o)
    if roll_in == "greedy":  # the played episodes are the greedy ones
        greedy_return = [r.episode_return for r in rollouts]
    elif finisher:  # the greedy candidate's value at turn 0 was the finisher's; play the greedy episodes
        plain, plain_stats = sampler.play(worlds, explore_turns=[-1] * len(worlds))
        greedy_return = [r.episode_return for r in plain]
        continuations += plain_stats.episodes
        stats.generated_tokens += plain_stats.generated_tokens
        stats.generate_seconds += plain_stats.generate_seconds
    # every forked continuation is an episode played to its end (from a forked state) by the model
    stats.episodes = len(worlds) + continuations
    stats.seconds = time.perf_counter() - started
    return [Improved(r, float(g if g is not None else r.episode_return), c)
            for r, g, c in zip(rollouts, greedy_return, corrections, strict=True)], stats


ROLL_IN = ("best", "greedy")
PREFER = ("greedy", "proposal")


def correction_record(messages: list[dict[str, Any]], answer: Answer, turn: int) -> dict[str, Any]:
    """One changed turn as a prompt-completion record: the conversation the model saw, and the
    best candidate written as the teacher's records write actions (loss on the completion only)."""
    from ..llm.tools import action_tools
    from .data import render_reply

    content, calls = render_reply(parse_action(answer[1] if answer[1] else answer[0]), "tools", f"call_{turn}")
    reply: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        reply["tool_calls"] = calls
    return {"prompt": messages, "completion": [reply], "tools": action_tools()}


__all__ = ["PREFER", "ROLL_IN", "Improved", "correction_record", "finish_with", "improve"]
