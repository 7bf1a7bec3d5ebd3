"""Policy improvement by lookahead: the live environment picks each turn's move among candidates.

For every world, the episode is played turn by turn. At each turn the seat's candidates are the
model's greedy answer, ``samples`` answers sampled from the model and ``proposals`` moves of each
scripted proposal policy (``random_valid``: valid moves with no expertise in them; the teacher; the
teacher with one of its steps switched off, ``without:<step>``, whose move is the one the teacher
would make next). Each
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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..llm.parsing import FormatError, parse_action
from ..policies import scripted_policies
from ..rollouts.engine import Flight
from .rollouts import Answer, BatchedSampler, Rollout, RolloutStats, World


@dataclass
class Improved:
    """One world's improved episode and what the greedy policy scored there."""

    rollout: Rollout
    greedy_return: float
    # (the conversation as the model saw it at that turn, the best candidate) for every turn where a
    # readable candidate other than the greedy answer was best
    corrections: list[tuple[list[dict[str, Any]], Answer]] = field(default_factory=list)
    # (that conversation, the better candidate, the greedy answer it beat) for every such turn where
    # the greedy answer was readable too (``pairs=True``; :func:`pair_record`, a preference pass's data)
    pairs: list[tuple[list[dict[str, Any]], Answer, Answer]] = field(default_factory=list)

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
            seed: int = 0, finisher: str | None = None, roll_in: str = "best", prefer: str = "greedy",
            pairs: bool = False) -> tuple[list[Improved], RolloutStats]:
    """Search every world's episode with one-turn lookahead (see the module docstring), on the
    sampler's rollout engine: the episodes and their forks live in its workers.

    ``finisher``: a scripted policy that finishes the forked episodes instead of the model, so a
    candidate's value is its return-to-go under that policy (the rollout algorithm with the
    scripted policy as its base: the chosen move is at least as good as the base policy's own
    move, when that move is a candidate). No model time goes into the continuations then, and
    each candidate is scored where its episode lives, in one request per worker.

    ``roll_in``: which move each episode goes on with, ``best`` (the best candidate: the improved
    episode) or ``greedy`` (the model's own answer, so the next turns are searched in the states the
    model itself reaches, as DAgger collects its labels). ``prefer``: who wins a tie, ``greedy`` (the
    model's answer, unless another candidate is strictly better) or ``proposal`` (the first proposal
    policy's first move, unless the greedy answer or a sample is strictly better). ``pairs``: keep a ranked pair
    for every changed turn whose greedy answer is readable (:attr:`Improved.pairs`)."""
    if roll_in not in ROLL_IN or prefer not in PREFER:
        raise ValueError(f"roll_in must be one of {ROLL_IN} and prefer one of {PREFER}")
    engine, pool = sampler.engine, sampler.pool
    policies = scripted_policies(sampler.proposal) if sampler.proposal else ()
    mark = engine.begin()
    flight = engine.open(worlds)
    n = len(worlds)
    greedy_return: list[float | None] = [None] * n
    corrections: list[list[tuple[list[dict[str, Any]], Answer]]] = [[] for _ in worlds]
    ranked: list[list[tuple[list[dict[str, Any]], Answer, Answer]]] = [[] for _ in worlds]
    continuations = turns = turn = 0
    while True:
        live = [i for i in range(n) if not flight.done[i]]
        if not live:
            break
        # candidates: the greedy answer first (it wins ties), then samples, then proposals; duplicates dropped
        # the greedy answers and every world's samples from one prefill of each prompt (calls cost most)
        greedy, drawn = engine.generate_with_samples(flight, live, seed * 7919 + turn * 131,
                                                     samples if sampler.temperature > 0 else 0)
        raw: list[tuple[int, Any]] = list(zip(live, greedy, strict=True))
        raw += [(live[j // samples], a) for j, a in enumerate(drawn)]
        read = pool.read([(flight.keys[i], r) for i, r in raw]).wait()
        cands: dict[int, list[Answer]] = {i: [] for i in live}
        for (i, _), answer in zip(raw, read, strict=True):
            cands[i].append(answer)
        first_proposal: dict[int, str] = {}
        if policies:
            # each proposal policy's moves; the first policy's keep the seeds of a run with one
            asks = [(i, p, k) for p in range(len(policies)) for k in range(proposals) for i in live]
            moves = pool.propose([(flight.keys[i], policies[p], seed * 7919 + turn * 131 + 17 * k + 7877 * p + i)
                                  for i, p, k in asks]).wait()
            for (i, _, _), move in zip(asks, moves, strict=True):
                cands[i].append(move)
                first_proposal.setdefault(i, _key(move))
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
        # score every candidate: fork, play it, finish (the finisher, or the model greedily)
        if finisher:
            scored = pool.score([(flight.keys[i], cands[i][c], finisher, seed + turn) for i, c in jobs]).wait()
            values = [v for v, _ in scored]
        else:
            children = pool.fork([flight.keys[i] for i, _ in jobs])
            first = pool.answer([(k, cands[i][c]) for k, (i, c) in zip(children, jobs, strict=True)]).wait()
            forks = Flight.forked([flight.prompts[i] for i, _ in jobs], first)
            engine.run(forks, [-1] * len(jobs), [False] * len(jobs), seed)
            values = [r.episode_return for r, _ in pool.close(children)]
            continuations += len(jobs)
        value = dict(zip(jobs, values, strict=True))
        moves_now: list[tuple[int, Answer]] = []
        changed: dict[int, Answer] = {}
        paired: dict[int, tuple[Answer, Answer]] = {}
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
            if best != 0 and _readable(cands[i][best]):
                changed[i] = cands[i][best]
            if pairs and i in changed and _readable(cands[i][0]) and value[(i, 0)] < value[(i, best)] - 1e-9:
                paired[i] = (cands[i][best], cands[i][0])  # a tie given to a proposal is no win over greedy
            moves_now.append((i, cands[i][best if roll_in == "best" else 0]))
        asked = sorted(set(changed) | set(paired))
        if asked:  # the conversation as the model saw it at this turn, and the better move
            for i, messages in zip(asked, pool.messages(list(flight.keys[i] for i in asked)), strict=True):
                if i in changed:
                    corrections[i].append((messages, changed[i]))
                if i in paired:
                    ranked[i].append((messages, *paired[i]))
        flight.apply(pool.answer([(flight.keys[i], a) for i, a in moves_now]).wait())
        turns += len(moves_now)
        turn += 1
    rollouts = [r for r, _ in pool.close(flight.keys)]
    stats = engine.end(mark, 0, turns)
    if roll_in == "greedy":  # the played episodes are the greedy ones
        greedy_return = [r.episode_return for r in rollouts]
    elif finisher:  # the greedy candidate's value at turn 0 was the finisher's; play the greedy episodes
        plain, plain_stats = sampler.play(worlds, explore_turns=[-1] * len(worlds))
        greedy_return = [r.episode_return for r in plain]
        continuations += plain_stats.episodes
        stats.add(plain_stats)
        stats.episodes -= plain_stats.episodes
    # every forked continuation is an episode played to its end (from a forked state) by the model
    stats.episodes = len(worlds) + continuations
    return [Improved(r, float(g if g is not None else r.episode_return), c, p)
            for r, g, c, p in zip(rollouts, greedy_return, corrections, ranked, strict=True)], stats


def _readable(answer: Answer) -> bool:
    return not isinstance(parse_action(answer[1] if answer[1] else answer[0]), FormatError)


ROLL_IN = ("best", "greedy")
PREFER = ("greedy", "proposal")


def correction_record(messages: list[dict[str, Any]], answer: Answer, turn: int, mode: str = "tools"
                      ) -> dict[str, Any]:
    """One changed turn as a prompt-completion record: the prompt the model saw (in ``mode``: the
    whole conversation, or for a mode that shows one turn at a time the system prompt and that
    turn, as :func:`gpu_arena.training.data.model_chats` cuts a record), and the best candidate
    written as the teacher's records write actions (loss on the completion only)."""
    from ..llm.prompts import prompt_tools

    return {"prompt": _prompt(messages, mode), "completion": [_reply(answer, turn)], "tools": prompt_tools(mode) or []}


def pair_record(messages: list[dict[str, Any]], chosen: Answer, rejected: Answer, turn: int, mode: str = "tools"
                ) -> dict[str, Any]:
    """One ranked turn as a preference record (TRL's conversational ``prompt`` / ``chosen`` /
    ``rejected``): the prompt as :func:`correction_record` cuts it, the move the environment valued
    higher and the one it valued lower, both written as the teacher's records write actions."""
    from ..llm.prompts import prompt_tools

    return {"prompt": _prompt(messages, mode), "chosen": [_reply(chosen, turn)], "rejected": [_reply(rejected, turn)],
            "tools": prompt_tools(mode) or []}


def _prompt(messages: list[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    from ..llm.prompts import WINDOW

    return [messages[0], {"role": "user", "content": messages[-1]["content"]}] if WINDOW.get(mode) == 1 else messages


def _reply(answer: Answer, turn: int) -> dict[str, Any]:
    from .data import render_reply

    content, calls = render_reply(parse_action(answer[1] if answer[1] else answer[0]), "tools", f"call_{turn}")
    reply: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        reply["tool_calls"] = calls
    return reply


__all__ = ["PREFER", "ROLL_IN", "Improved", "correction_record", "finish_with", "improve", "pair_record"]
