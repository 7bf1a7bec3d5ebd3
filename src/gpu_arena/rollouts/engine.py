"""The rollout engine: a model plays many episodes at once, the environment's work off its path.

Every loop of the project that plays a model against the environment runs here: RFT's sampling and
its lookahead (:mod:`gpu_arena.training.lookahead`), the batched evaluation of checkpoints
(:mod:`gpu_arena.training.evaluate`), and the benches. A :class:`RolloutEngine` pairs a generation
backend (:mod:`gpu_arena.rollouts.backends`) with a pool of environment workers
(:mod:`gpu_arena.rollouts.workers`): the episodes in flight live in the workers as sessions; this
process keeps only each episode's prompt ids and grammar. Each round, the live episodes' prompts
are generated in one backend call and the replies sent to the workers, which read them, step the
environments, render the next turns and append their ids.

With process or Ray workers the episodes of a chunk are played in two halves, one generating while
the workers play the other's replies (double buffering), so ``generate`` does not wait for an
environment pass; inline (``workers=0``) there is one half and no overlap.

Episodes are the same as the loop before the engine played them (decision 0027): the same
environment, prompts, grammar and reading of replies; greedy episodes are equal move for move.
Sampled ones draw from the same distribution with other random draws (a half is its own call).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..policies import scripted_policies
from .backends import Backend
from .session import Answer, Rollout, Turn, World
from .workers import WorkerPool


@dataclass
class RolloutStats:
    """What a batch of episodes cost: episodes, turns, tokens, wall seconds, seconds inside
    ``generate``, and the CPU seconds of this process and of the workers."""

    episodes: int
    turns: int
    generated_tokens: int
    prompt_tokens: int
    seconds: float
    generate_seconds: float
    main_cpu_seconds: float = 0.0
    worker_cpu_seconds: float = 0.0

    @property
    def episodes_per_min(self) -> float:
        return 60.0 * self.episodes / max(self.seconds, 1e-9)

    @property
    def turns_per_s(self) -> float:
        return self.turns / max(self.seconds, 1e-9)

    @property
    def generate_share(self) -> float:
        """The share of the wall time spent inside the backend's generation."""
        return self.generate_seconds / max(self.seconds, 1e-9)

    def add(self, other: RolloutStats) -> None:
        for name in ("episodes", "turns", "generated_tokens", "prompt_tokens", "seconds", "generate_seconds",
                     "main_cpu_seconds", "worker_cpu_seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def summary(self) -> dict[str, float]:
        """The figures a run records and its progress line shows."""
        return {"episodes": self.episodes, "turns": self.turns, "turns_per_s": self.turns_per_s,
                "generate_share": self.generate_share, "generate_s": self.generate_seconds,
                "env_s": self.seconds - self.generate_seconds, "cpu_s": self.main_cpu_seconds + self.worker_cpu_seconds}


class Flight:
    """The generation side's copy of the episodes in flight: prompt ids, grammar, state."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        self.keys = [t.key for t in turns]
        self.prompts: list[list[int]] = [list(t.ids) for t in turns]
        self.first = [len(p) for p in self.prompts]  # the first prompt's length: a trajectory's prompt
        self.masks: list[list[int]] = [[] for _ in turns]  # after the first prompt: 1 where the model wrote
        self.grammars = [t.grammar for t in turns]
        self.legal = [t.legal for t in turns]
        self.done = [t.done for t in turns]
        self.turns = [0] * len(turns)
        self.index = {k: i for i, k in enumerate(self.keys)}

    def grammar(self, i: int, seat: str) -> tuple[str, int] | None:
        """Row ``i``'s grammar, built here from its legal ids where the worker left it unbuilt."""
        g, lists = self.grammars[i], self.legal[i]
        if g is None and lists is not None:
            from ..llm.constrain import grammar_of

            built = grammar_of(lists, seat)
            g = self.grammars[i] = (built.lark, built.max_bytes)
        return g

    @classmethod
    def forked(cls, parents: Sequence[list[int]], turns: Sequence[Turn]) -> Flight:
        """The flight of forks whose first moves gave ``turns``, their parents' prompts ``parents``."""
        flight = cls(turns)
        flight.prompts = [p[:t.ids_from] + list(t.ids) for p, t in zip(parents, turns, strict=True)]
        return flight

    def apply(self, turns: Sequence[Turn]) -> None:
        for t in turns:
            i = self.index[t.key]
            del self.prompts[i][t.ids_from:]
            self.prompts[i].extend(t.ids)
            mask = self.masks[i]
            del mask[max(t.ids_from - self.first[i], 0):]
            mask.extend([1] * t.model_len + [0] * (len(t.ids) - t.model_len))
            self.grammars[i] = t.grammar
            self.legal[i] = t.legal
            self.done[i] = t.done


class RolloutEngine:
    """Plays worlds with a backend's model in the seat (see the module). ``temperature=0`` decodes
    greedily; ``max_new_tokens`` caps a free reply (a constrained one gets room for the longest
    action its grammar allows); ``batch_size`` bounds the episodes in flight; ``proposal`` names
    the scripted policy whose move a proposed turn plays instead of a sample.

    ``check_first`` (on by default; used where the backend returns token ids): a greedy turn under
    a grammar is decoded freely first, and only the replies that are not sentences of their turn's
    grammar are decoded again under it (:func:`gpu_arena.llm.matching.reply_fits`, checked without
    compiling the grammar). A fitting greedy reply is the one constrained decoding writes, so the
    episodes are the same; most greedy turns of a trained model then compile no grammar (about
    0.5-2.5 ms each, decision 0033). :attr:`checked` and :attr:`redone` count the greedy replies
    checked and those decoded again."""

    def __init__(self, backend: Backend, pool: WorkerPool, *, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 64, batch_size: int = 32, proposal: str | None = None,
                 check_first: bool = True) -> None:
        self.backend = backend
        self.check_first = check_first and bool(getattr(backend, "returns_ids", False))
        self.checked = self.redone = 0
        self.pool = pool
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.proposal = proposal

    # ------------------------------------------------------------------ accounting

    def begin(self) -> tuple[float, float, float, Any]:
        """A run starts: the backend's kept KV caches are dropped (the weights may have been
        trained since the last run), and the counters are read for :meth:`end`."""
        clear = getattr(self.backend, "clear_cache", None)
        if clear is not None:
            clear()
        b = self.backend.stats
        return (time.perf_counter(), time.process_time(), self.pool.worker_cpu(),
                (b.seconds, b.prompt_tokens, b.generated_tokens))

    def end(self, mark: tuple[float, float, float, Any], episodes: int, turns: int) -> RolloutStats:
        wall, cpu, wcpu, (gs, pt, gt) = mark
        b = self.backend.stats
        return RolloutStats(episodes, turns, b.generated_tokens - gt, b.prompt_tokens - pt, time.perf_counter() - wall,
                            b.seconds - gs, time.process_time() - cpu, self.pool.worker_cpu() - wcpu)

    def generate(self, flight: Flight, rows: Sequence[int], temperature: float, seed: int,
                 repeat: int = 1) -> list[list[int] | str]:
        """The backend's replies to the prompts of ``rows`` (each ``repeat`` times, in a row)."""
        idx = [i for i in rows for _ in range(repeat)]
        prompts = [flight.prompts[i] for i in idx]
        if all(flight.grammars[i] is None and flight.legal[i] is None for i in idx):  # unconstrained
            return self.backend.generate(prompts, temperature=temperature, top_p=self.top_p,
                                         max_new_tokens=self.max_new_tokens, seed=seed)
        seat = self.pool.config.seat
        if not (self.check_first and temperature <= 0 and all(flight.legal[i] is not None for i in idx)):
            return self.backend.generate(prompts, temperature=temperature, top_p=self.top_p,
                                         max_new_tokens=self.max_new_tokens, seed=seed,
                                         grammars=[flight.grammar(i, seat) for i in idx])
        from ..llm.matching import reply_fits

        replies = self.backend.generate(prompts, temperature=0.0, top_p=self.top_p,
                                        max_new_tokens=self.max_new_tokens, seed=seed)
        tok = self.pool.config.tokenizer
        redo = [j for j, (i, r) in enumerate(zip(idx, replies, strict=True))
                if not (isinstance(r, list) and reply_fits(tok, r, flight.legal[i]))]
        self.checked += len(replies)
        self.redone += len(redo)
        if redo:  # their grammars, built here where the workers left them unbuilt
            again = self.backend.generate([prompts[j] for j in redo], temperature=0.0, top_p=self.top_p,
                                          max_new_tokens=self.max_new_tokens, seed=seed,
                                          grammars=[flight.grammar(idx[j], seat) for j in redo])
            for j, r in zip(redo, again, strict=True):
                replies[j] = r
        return replies

    def generate_with_samples(self, flight: Flight, rows: Sequence[int], seed: int, samples: int
                              ) -> tuple[list[list[int] | str], list[list[int] | str]]:
        """The greedy reply to each prompt of ``rows`` and ``samples`` sampled ones (in a row per
        prompt), each prompt prefilled once where the backend can share it
        (:meth:`~gpu_arena.rollouts.backends.TransformersBackend.generate_with_samples`), else two calls."""
        shared = getattr(self.backend, "generate_with_samples", None)
        if shared is None or not samples or self.temperature <= 0:
            greedy = self.generate(flight, rows, 0.0, seed)
            drawn = self.generate(flight, rows, self.temperature, seed * 7919 + 1, repeat=samples) \
                if samples and self.temperature > 0 else []
            return greedy, drawn
        grammars = [flight.grammar(i, self.pool.config.seat) for i in rows]
        return shared([flight.prompts[i] for i in rows], samples=samples, temperature=self.temperature,
                      top_p=self.top_p, max_new_tokens=self.max_new_tokens, seed=seed,
                      grammars=grammars if any(g is not None for g in grammars) else None)

    # ------------------------------------------------------------------ playing

    def play(self, worlds: Sequence[World], *, seed: int = 0, explore_turns: Sequence[int | None] | None = None,
             propose: Sequence[bool] | None = None, progress: Callable[[int], None] | None = None,
             finish: Callable[[Rollout, Any], Any] | None = None) -> tuple[list[Rollout], RolloutStats]:
        """Play every world once; the rollouts in the order of ``worlds`` and what it cost.

        ``explore_turns[i]``: the one turn of episode ``i`` answered by sampling at the engine's
        temperature, every other turn greedily (``None``, or no list: every turn sampled; ``-1``:
        none). ``propose[i]``: that turn plays the proposal policy's move instead. ``finish(rollout,
        env)`` runs for every episode once it is over, where its environment lives (inline: here;
        else it must be picklable); :attr:`finished` holds what it returned, in world order."""
        mark = self.begin()
        explore: list[int | None] = list(explore_turns) if explore_turns is not None else [None] * len(worlds)
        proposed = list(propose) if propose is not None else [False] * len(worlds)
        if len(explore) != len(worlds) or len(proposed) != len(worlds):
            raise ValueError("explore_turns and propose need one entry per world")
        if any(proposed) and (self.proposal is None or any(p and e is None for p, e in zip(proposed, explore,
                                                                                            strict=True))):
            raise ValueError("a proposed turn needs a proposal policy and an explore turn")
        out: list[Rollout] = []
        self.finished: list[Any] = []
        turns = 0
        for lo in range(0, len(worlds), self.batch_size):
            hi = lo + self.batch_size
            flight = self.open(worlds[lo:hi], [self._needs_grammar(0, e, p)
                                                for e, p in zip(explore[lo:hi], proposed[lo:hi], strict=True)])
            turns += self.run(flight, explore[lo:hi], proposed[lo:hi], seed * 1_000_003 + lo)
            for i, (rollout, done) in enumerate(self.pool.close(flight.keys, finish)):
                if self.pool.config.verbatim:  # the trajectory as the model lived it, token by token
                    rollout.prompt_ids = flight.prompts[i][:flight.first[i]]
                    rollout.completion_ids = flight.prompts[i][flight.first[i]:]
                    rollout.completion_mask = list(flight.masks[i])
                out.append(rollout)
                self.finished.append(done)
            if progress is not None:
                progress(len(worlds[lo:hi]))
        return out, self.end(mark, len(out), turns)

    def _needs_grammar(self, turn: int, explore: int | None, proposed: bool) -> bool:
        """Whether turn ``turn`` of an episode needs its grammar built (see :meth:`run`)."""
        if proposed and explore == turn:
            return False
        return not self.check_first or (self.temperature > 0 and explore in (None, turn))

    def open(self, worlds: Sequence[World], grammars: Sequence[bool] | None = None) -> Flight:
        """Start an episode per world in the workers; their flight (``grammars``: which first turns
        need their grammar built, all by default)."""
        return Flight(self.pool.open(worlds, grammars).wait())

    def run(self, flight: Flight, explore: Sequence[int | None], proposed: Sequence[bool], seed: int) -> int:
        """Play the episodes of ``flight`` to their end (``explore[i]`` counts turns from the
        flight's start); the turns played."""
        n = len(flight.keys)
        halves = [list(range(n))] if self.pool.kind == "inline" or n < 2 else [list(range(0, n, 2)),
                                                                                  list(range(1, n, 2))]
        pending: list[Any] = [None] * len(halves)
        call = played = 0
        policies = scripted_policies(self.proposal) if self.proposal else ()
        while True:
            busy = False
            for h, rows in enumerate(halves):
                if pending[h] is not None:
                    flight.apply(pending[h].wait())
                    pending[h] = None
                live = [i for i in rows if not flight.done[i]]
                if not live:
                    continue
                busy = True
                answers: dict[int, list[int] | str | Answer] = {}
                chosen = [i for i in live if proposed[i] and explore[i] == flight.turns[i]]
                if chosen:
                    # several proposal policies take the episodes in turn
                    answers.update(zip(chosen, self.pool.propose(
                        [(flight.keys[i], policies[i % len(policies)], seed + i) for i in chosen]).wait(), strict=True))
                sampled = [i for i in live if i not in answers and self.temperature > 0
                           and explore[i] in (None, flight.turns[i])]
                greedy = [i for i in live if i not in answers and i not in set(sampled)]
                for group, temperature in ((sampled, self.temperature), (greedy, 0.0)):
                    if group:
                        answers.update(zip(group, self.generate(flight, group, temperature, seed + call), strict=True))
                call += 1
                for i in live:
                    flight.turns[i] += 1
                played += len(live)
                # the next turn's grammar is built in the worker where that turn will need it whole: a
                # sampled turn; a greedy one is checked first (check_first) and a proposed one plays
                # a scripted move
                pending[h] = self.pool.answer([(flight.keys[i], answers[i], self._needs_grammar(
                    flight.turns[i], explore[i], proposed[i])) for i in live])
            if not busy:
                return played


__all__ = ["Flight", "RolloutEngine", "RolloutStats"]

