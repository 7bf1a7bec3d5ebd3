"""Environment workers: where the sessions of the episodes in flight live, off the generation path.

An :class:`EnvWorker` holds sessions by key and answers batched requests with plain, picklable
data (:class:`~gpu_arena.rollouts.session.Turn`, answers, returns, rollouts). A :class:`WorkerPool`
spreads episodes over its workers and sends each worker one request per call. Three kinds:

- ``inline`` (``workers=0``): the worker runs in this process, each request when it is sent. No
  overlap with generation, nothing to start: tests, tiny runs, and callers that read the live
  environments (``finish`` callbacks given the environment).
- ``process`` (``workers=N``): N processes (spawned, so no thread state of this process is
  copied), one pipe each. A request is sent to every worker at once and read back later, so the
  workers step, render and tokenize while this process generates.
- ``ray`` (``backend="ray"``): the same workers as Ray actors, on whatever nodes the cluster has
  (``ray.init`` is the caller's; a local one is started if none is running).

Every request returns the worker's CPU seconds so far, so a run can say where its CPU time went.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..llm.tools import action_tools
from .session import Answer, Reply, Rollout, Session, SessionConfig, Turn, World, read_reply

BACKENDS = ("process", "ray")


class EnvWorker:
    """Sessions by key, and the batched operations the engine asks of them (see the module)."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.tools = action_tools()
        self.sessions: dict[int, Session] = {}

    def cpu_noop(self, items: Any) -> None:
        """Nothing: a request that only reads the worker's CPU seconds."""

    def open(self, items: Sequence[tuple[int, World] | tuple[int, World, bool]]) -> list[Turn]:
        """Start a session per world; ``(key, world, False)`` leaves the first turn's grammar unbuilt."""
        out = []
        for key, world, *grammar in items:
            s = self.sessions[key] = Session(key, world, self.config, self.tools)
            out.append(s.start(*grammar))
        return out

    def answer(self, items: Sequence[tuple[int, Reply | Answer] | tuple[int, Reply | Answer, bool]]) -> list[Turn]:
        """Play each reply; ``(key, reply, False)`` leaves the next turn's grammar unbuilt."""
        return [self.sessions[item[0]].answer(item[1], *item[2:]) for item in items]

    def propose(self, items: Sequence[tuple[int, str, int]]) -> list[Answer]:
        return [self.sessions[key].propose(policy, seed) for key, policy, seed in items]

    def read(self, items: Sequence[tuple[int, Reply]]) -> list[Answer]:
        """Replies read as the session would read them, without playing them (candidates)."""
        return [(new, None, 0) if isinstance(new, str) else
                read_reply(self.config.tokenizer, new, self.sessions[key].chat.ids, self.tools) for key, new in items]

    def messages(self, items: Sequence[tuple[int, None]]) -> list[list[dict[str, Any]]]:
        """Each session's conversation as the model sees it now (copies)."""
        return [self.sessions[key].conv.messages() for key, _ in items]

    def fork(self, items: Sequence[tuple[int, int]]) -> list[None]:
        for parent, child in items:
            self.sessions[child] = self.sessions[parent].fork(child)
        return [None] * len(items)

    def score(self, items: Sequence[tuple[int, Answer, str | None, int]]) -> list[tuple[float, bool]]:
        """For each ``(key, answer, finisher, seed)``: fork the session, play the answer, finish with
        the scripted ``finisher`` when given; the return so far of the fork and whether it ended."""
        out = []
        for key, answer, finisher, seed in items:
            s = self.sessions[key].fork(-1)
            obs = s.play(answer)
            value = s.rollout.episode_return
            if finisher and not obs.done:
                value += s.finish_with(finisher, seed)
            out.append((value, bool(s.env.episode.done)))
        return out

    def close(self, items: Sequence[tuple[int, Any]]) -> list[tuple[Rollout, Any]]:
        """Drop sessions; each one's rollout and what ``finish(rollout, env)`` returned for it
        (``finish`` must be picklable for process and Ray workers)."""
        out = []
        for key, finish in items:
            s = self.sessions.pop(key)
            out.append((s.rollout, finish(s.rollout, s.env) if finish is not None else None))
        return out

    def call(self, method: str, items: Any) -> tuple[Any, float, float]:
        """One request: the method's result, this worker's CPU seconds so far, and those the
        request took."""
        t0 = time.process_time()
        result = getattr(self, method)(items)
        t1 = time.process_time()
        return result, t1, t1 - t0


def _serve(conn: Any, config: SessionConfig) -> None:
    """A process worker's loop: requests in, results out, until the pipe closes."""
    worker = EnvWorker(config)
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        method, items = request
        try:
            conn.send(("ok", worker.call(method, items)))
        except Exception as e:  # the caller raises it; the worker goes on serving
            import traceback

            conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def portable(config: SessionConfig) -> SessionConfig:
    """``config`` as it can travel to another process: the tokenizer without what this process
    cached on it (compiled grammars and llguidance's tokenizer are not picklable; a worker builds
    its own)."""
    import copy
    import dataclasses

    tok = copy.copy(config.tokenizer)
    for name in [n for n in vars(tok) if n.startswith("_gpu_arena_")]:
        delattr(tok, name)
    return dataclasses.replace(config, tokenizer=tok)


class WorkerError(RuntimeError):
    """A request failed in a worker (the message holds the worker's traceback)."""


class Pending:
    """Requests sent to workers and not yet read back; :meth:`wait` reads them, in the order sent."""

    def __init__(self, read: Callable[[], list[Any]]) -> None:
        self._read = read
        self._result: list[Any] | None = None

    def wait(self) -> list[Any]:
        if self._result is None:
            self._result = self._read()
        return self._result


class WorkerPool:
    """``workers`` environment workers (0: inline) of kind ``backend`` (``process``: local processes, or
    ``ray`` actors). Episodes are spread over the workers as they open; a fork stays with its
    parent. Use as a context manager, or :meth:`close` it."""

    def __init__(self, config: SessionConfig, workers: int = 0, backend: str = "process") -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown worker backend {backend!r}; expected one of {', '.join(BACKENDS)}")
        if workers < 0:
            raise ValueError("workers must be 0 (inline) or more")
        if backend == "ray" and workers == 0:
            workers = 1
        self.config = config
        self.backend = backend
        self.kind = "inline" if workers == 0 else ("ray" if backend == "ray" else "process")
        self.size = max(workers, 1)
        self._keys = itertools.count()
        self.owner: dict[int, int] = {}
        self.cpu_seconds = [0.0] * self.size  # each worker's CPU seconds at its last answer
        self._cpu_start: list[float | None] = [None] * self.size
        self._next = 0
        self._inline: EnvWorker | None = None
        self._conns: list[Any] = []
        self._waiting: list[collections.deque[list[Any]]] = [collections.deque() for _ in range(self.size)]
        self._procs: list[Any] = []
        self._actors: list[Any] = []
        if self.kind == "inline":
            self._inline = EnvWorker(config)
        elif self.kind == "process":
            import multiprocessing as mp

            ctx = mp.get_context("spawn")
            for _ in range(self.size):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(child, portable(config)), daemon=True)
                proc.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
        else:
            import ray

            if not ray.is_initialized():
                ray.init(include_dashboard=False, log_to_driver=False, num_cpus=max(self.size, 1))
            actor = ray.remote(num_cpus=0)(EnvWorker)
            self._actors = [actor.remote(portable(config)) for _ in range(self.size)]
        # every worker's starting CPU, so worker_cpu() counts this pool's work only
        self.method_cpu: dict[str, float] = {}  # CPU seconds the workers spent, by request
        for w, (_, cpu, _spent) in enumerate(self._request_all({w: ("cpu_noop", []) for w in range(self.size)}).wait()):
            self._cpu_start[w] = cpu

    # ------------------------------------------------------------------ plumbing

    def _request_all(self, requests: dict[int, tuple[str, Any]]) -> Pending:
        """Send ``requests`` (worker -> (method, items)); a Pending of ``[(result, cpu)]`` by worker order."""
        order = sorted(requests)
        if self.kind == "inline":
            assert self._inline is not None
            worker = self._inline
            results = [worker.call(*requests[w]) for w in order]
            return Pending(lambda: results)
        if self.kind == "process":
            slots = []
            for w in order:
                self._conns[w].send(requests[w])
                slot: list[Any] = []
                self._waiting[w].append(slot)
                slots.append((w, slot))

            def read() -> list[Any]:
                out = []
                for w, slot in slots:
                    while not slot:  # answers come back in the order sent: fill the oldest first
                        self._waiting[w].popleft().append(self._conns[w].recv())
                    status, value = slot[0]
                    if status != "ok":
                        raise WorkerError(value)
                    out.append(value)
                return out

            return Pending(read)
        import ray

        refs = [self._actors[w].call.remote(*requests[w]) for w in order]
        return Pending(lambda: list(ray.get(refs)))

    def _scatter(self, method: str, items: Sequence[tuple[Any, ...]]) -> Pending:
        """Send ``items`` (``(key, ...)`` tuples) to the workers that hold their keys; a Pending
        of the results in the order of ``items``."""
        by_worker: dict[int, list[int]] = {}
        for i, item in enumerate(items):
            by_worker.setdefault(self.owner[item[0]], []).append(i)
        pending = self._request_all({w: (method, [items[i] for i in idx]) for w, idx in by_worker.items()})
        order = sorted(by_worker)

        def gather() -> list[Any]:
            out: list[Any] = [None] * len(items)
            for w, (results, cpu, spent) in zip(order, pending.wait(), strict=True):
                self.cpu_seconds[w] = cpu - (self._cpu_start[w] or 0.0)
                self.method_cpu[method] = self.method_cpu.get(method, 0.0) + spent
                for i, r in zip(by_worker[w], results, strict=True):
                    out[i] = r
            return out

        return Pending(gather)

    # ------------------------------------------------------------------ the engine's operations

    def open(self, worlds: Sequence[World], grammars: Sequence[bool] | None = None) -> Pending:
        """Start one session per world (spread over the workers); a Pending of their first Turns
        (``grammars[i]`` False: world ``i``'s first grammar left unbuilt)."""
        items: list[tuple[Any, ...]] = []
        for i, w in enumerate(worlds):
            key = next(self._keys)
            self.owner[key] = self._next
            self._next = (self._next + 1) % self.size
            items.append((key, w) if grammars is None else (key, w, grammars[i]))
        return self._scatter("open", items)

    def answer(self, items: Sequence[tuple[int, Reply | Answer] | tuple[int, Reply | Answer, bool]]) -> Pending:
        return self._scatter("answer", items)

    def propose(self, items: Sequence[tuple[int, str, int]]) -> Pending:
        return self._scatter("propose", items)

    def read(self, items: Sequence[tuple[int, Reply]]) -> Pending:
        return self._scatter("read", items)

    def messages(self, keys: Sequence[int]) -> list[list[dict[str, Any]]]:
        return list(self._scatter("messages", [(k, None) for k in keys]).wait())

    def score(self, items: Sequence[tuple[int, Answer, str | None, int]]) -> Pending:
        return self._scatter("score", items)

    def fork(self, parents: Sequence[int]) -> list[int]:
        """New sessions, each a copy of its parent, on the parent's worker; their keys."""
        items = []
        for p in parents:
            key = next(self._keys)
            self.owner[key] = self.owner[p]
            items.append((p, key))
        self._scatter("fork", items).wait()
        return [k for _, k in items]

    def close(self, keys: Sequence[int], finish: Any = None) -> list[tuple[Rollout, Any]]:
        out = self._scatter("close", [(k, finish) for k in keys]).wait()
        for k in keys:
            del self.owner[k]
        return list(out)

    def worker_cpu(self) -> float:
        """CPU seconds the workers spent on this pool's requests (inline: counted in this process)."""
        return 0.0 if self.kind == "inline" else float(sum(self.cpu_seconds))

    def shutdown(self) -> None:
        for conn in self._conns:
            try:
                conn.send(None)
                conn.close()
            except OSError:
                pass
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
        if self._actors:
            import ray

            for a in self._actors:
                ray.kill(a)
        self._conns, self._procs, self._actors = [], [], []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


__all__ = ["BACKENDS", "EnvWorker", "Pending", "WorkerError", "WorkerPool"]
