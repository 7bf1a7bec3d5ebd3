"""Run policies in the controlled seat over tasks and seeds, on a process pool or a Ray cluster.

One job is one (task, split, seed) with every policy: the world and its exact welfare optimum are
built once per job, and every policy meets the same opponents on the same world. Results do not
depend on the number of workers or the order jobs finish in: rows are sorted before they are
returned.

``opponents`` puts any policy in the other seats (a name such as ``llm:openai:<model>@<url>``
for all of them, a list in seat order, or a mapping seat -> name; default: the world's
archetypes), and ``judge_mode``/``judge`` run judge mode with the rule judge or a model judge.
``backend="ray"`` runs the same jobs as Ray tasks, on a local Ray instance or on the cluster at
``ray_address`` (every node needs this package installed, at the same version).
Every model in an episode (the controlled seat's agent, LLM opponents, an LLM judge) reports
its token and latency ledger in ``EpisodeResult.llm_usage``; :func:`usage_rows` sums them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.engine import world_fingerprint
from ..core.policy import Metered
from ..core.rules import JUDGE_MODES
from ..core.welfare import social_optimum
from ..core.worldgen import generate_world
from ..env import GpuArenaEnv
from ..native.episode import read_world
from ..policies import DEFAULT_OPPONENTS, OpponentsSpec, install_plugins, make_policy, plugins
from ..rollout import play_seat


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
    # seat (or "judge") -> {"role", "agent", and the ledger's counts}; only for policies with a ledger
    llm_usage: dict[str, dict[str, Any]] | None = field(default=None)
    # every seat's return (lab_0 is ``episode_return``): in self-play, each seat is the policy itself
    seat_returns: dict[str, float] | None = field(default=None)
    # lab_0's share of each deal it settled whose joint gain was positive (what the deal did to its
    # potential over what it did to both labs'), in settlement order: how the pie was split, beside
    # how often there was one (``deal_rate``); the league's "gain share" by the same rule
    gain_shares: list[float] = field(default_factory=list)
    # which engine played the episode ("rust" | "python") and why the Python core did (None: Rust
    # did; the reasons are gpu_arena.native.report's); "" in a row made before they were recorded
    engine: str = ""
    engine_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def play_episode(policy: str, task: str, split: str, seed: int, *, opponents: Any = None,
                 keep_replay: bool = False, optimum: float | None = None, judge_mode: str = "none",
                 judge: Any = None) -> EpisodeResult:
    """Play one episode with ``policy`` in seat lab_0 against ``opponents`` (default: the world's
    archetypes; any form ``OpponentsSpec.parse`` reads; ``self``: ``policy`` in every seat, one
    instance per seat), in judge mode if asked (``judge``: a model judge's name)."""
    spec = OpponentsSpec.parse(opponents).resolve_self(policy)
    env = GpuArenaEnv(task=task, split=split, opponents=spec, judge_mode=judge_mode, judge=judge)
    env.reset(seed=seed)
    driver = make_policy(policy, seed=seed)
    played = play_seat(env, driver)
    usage = {"lab_0": _usage("controlled", policy, driver)}
    usage.update({lid: _usage("opponent", _spec_name(spec, lid, p), p) for lid, p in env.policies.items()})
    usage["judge"] = _usage("judge", str(judge), env.judge)
    llm_usage = {k: v for k, v in usage.items() if v is not None}
    return episode_result(env, policy, task, split, seed, episode_return=played.episode_return, columns=played.columns,
                          steps=played.steps, optimum=optimum,
                          keep_replay=keep_replay, judge_mode=judge_mode, llm_usage=llm_usage or None)


def episode_result(env: GpuArenaEnv, policy: str, task: str, split: str, seed: int, *, episode_return: float, columns: dict[str, float], steps: int,
                   optimum: float | None, keep_replay: bool, judge_mode: str = "none",
                   llm_usage: dict[str, dict[str, Any]] | None = None) -> EpisodeResult:
    """The row of an episode ``env`` has finished with ``policy`` in seat lab_0: its return and
    columns as the caller summed them, the environment's episode metrics against ``optimum``, and
    the replay if kept. Every way of playing an evaluation episode (one at a time here, batched in
    ``gpu_arena.training.evaluate``) builds its row here, so the rows agree field for field."""
    from .stats import deal_gain_shares  # stats reads this module's rows

    episode = env.episode
    report = env.engine_report()
    assert episode is not None and report is not None
    world = read_world(episode)  # a copy where Rust plays it: the row leaves the episode where it is
    metrics = env.metrics(optimum)
    me = metrics["labs"]["lab_0"]
    replay = None
    if keep_replay:
        replay = {"task": task, "split": split, "seed": seed, "policy": policy, "seat": "lab_0",
                  "transcript": episode.transcript}
        if judge_mode != "none":
            replay["judge_mode"] = judge_mode
    return EpisodeResult(
        policy=policy, task=task, split=split, seed=seed, episode_return=episode_return, columns=columns, steps=steps,
        welfare=metrics["welfare"], optimum=metrics["optimum"], welfare_ratio=metrics["welfare_ratio"],
        surplus_over_batna=me["surplus_over_batna"], deal_rate=me["deal_rate"], breach_rate=me["breach_rate"],
        invalid_rate=me["invalid_rate"], invalid_actions=world.labs["lab_0"].invalid_actions,
        replay=replay, llm_usage=llm_usage, seat_returns=dict(episode.returns),
        gain_shares=deal_gain_shares(world.events, "lab_0"), engine=report.playing, engine_reason=report.reason)


def _spec_name(spec: OpponentsSpec, seat: str, policy: Any) -> str:
    name = getattr(policy, "name", None)
    if isinstance(name, str):
        return name
    return spec.name_for(seat) or type(policy).__name__


def _usage(role: str, name: str, source: Any) -> dict[str, Any] | None:
    """A policy's (or judge's) token and latency ledger as a dict, if it keeps one (LLM agents do)."""
    used = source.usage() if isinstance(source, Metered) else None
    if used is None:
        return None
    return {"role": role, "agent": getattr(source, "name", name), **used}


USAGE_SUMS = ("calls", "prompt_tokens", "completion_tokens", "estimated_calls", "model_s", "overhead_s", "retries",
              "failures", "format_errors")


def usage_rows(results: Sequence[EpisodeResult]) -> list[dict[str, Any]]:
    """The LLM ledgers of a run summed per (controlled policy, task, split, role, agent): prompt and
    completion tokens, model latency, the agent's own overhead, retries, failures and format
    errors (parse failures; malformed verdicts for a judge), with per-call means. Rows come in
    the order of the results; none if no model took part."""
    groups: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
    for r in results:
        for u in (r.llm_usage or {}).values():
            key = (r.policy, r.task, r.split, str(u["role"]), str(u["agent"]))
            g = groups.setdefault(key, {"episodes": 0, "max_call_s": 0.0, **dict.fromkeys(USAGE_SUMS, 0)})
            g["episodes"] += 1
            for k in USAGE_SUMS:
                g[k] += u.get(k, 0)
            g["max_call_s"] = max(g["max_call_s"], u.get("max_call_s", 0.0))
    rows = []
    for (policy, task, split, role, agent), g in groups.items():
        n = max(g["calls"], 1)
        rows.append({"policy": policy, "task": task, "split": split, "role": role, "agent": agent, **g,
                     "prompt_tokens_per_call": g["prompt_tokens"] / n,
                     "completion_tokens_per_call": g["completion_tokens"] / n,
                     "model_s_per_call": g["model_s"] / n, "overhead_ms_per_call": 1000 * g["overhead_s"] / n,
                     "format_error_rate": g["format_errors"] / n})
    return rows


Optima = dict[tuple[str, str, int], tuple[str, float]]  # (task, split, seed) -> (world fingerprint, optimum)
Opponents = str | Sequence[str] | Mapping[str, str] | OpponentsSpec | None  # what OpponentsSpec.parse reads


@dataclass(frozen=True, slots=True)
class EvalJob:
    """One world of an evaluation: every policy plays ``(task, split, seed)`` in seat lab_0 against
    the same opponents. ``cached`` is the world's stored ``(fingerprint, optimum)``, if any. A job
    travels to a worker process or a Ray task as it is (names, not policy objects)."""

    policies: tuple[str, ...]
    task: str
    split: str
    seed: int
    keep_replay: bool = False
    cached: tuple[str, float] | None = None
    opponents: Any = None
    judge_mode: str = "none"
    judge: str | None = None


def _job(job: EvalJob) -> tuple[list[EpisodeResult], tuple[str, float]]:
    fingerprint, optimum = world_optimum(job.task, job.split, job.seed, job.cached)
    results = [play_episode(p, job.task, job.split, job.seed, keep_replay=job.keep_replay, optimum=optimum,
                            opponents=job.opponents, judge_mode=job.judge_mode, judge=job.judge)
               for p in job.policies]
    return results, (fingerprint, optimum)


def world_optimum(task: str, split: str, seed: int, cached: tuple[str, float] | None = None) -> tuple[str, float]:
    """``(fingerprint, exact welfare optimum)`` of a world; ``cached`` (a stored pair) is used when
    its fingerprint still matches the world generated now, else the optimum is solved again (it
    costs up to seconds a world)."""
    world = generate_world(task, split, seed)
    fingerprint = world_fingerprint(world)
    if cached is not None and cached[0] == fingerprint:
        return cached
    return fingerprint, social_optimum(list(world.blocks.values()), list(world.jobs.values()))


BACKENDS = ("process", "ray")


def _pool_context() -> Any:
    """``spawn`` once torch is loaded in this process, else the platform's default. A worker forked
    from a process whose torch (OpenMP) thread pool has run inherits that pool's locks held and
    blocks on its first matmul: the training pipeline's evaluation, forked after RL, hung with
    both workers asleep. Spawned workers start clean (about a second each to import)."""
    import multiprocessing
    import sys

    return multiprocessing.get_context("spawn") if "torch" in sys.modules else None


def run_evaluation(policies: Sequence[str], tasks: Sequence[str], split: str, seeds: Sequence[int], *,
                   workers: int = 1, keep_replays: bool = False, optima: Optima | None = None,
                   progress: Callable[[int], None] | None = None, opponents: Opponents = None,
                   judge_mode: str = "none", judge: str | None = None, backend: str = "process",
                   ray_address: str | None = None) -> list[EpisodeResult]:
    """Every policy × task × seed. ``progress`` is called with the number of episodes just finished.

    ``optima`` caches the exact welfare optimum per world (it costs up to seconds a world); it is
    read, and filled with what this run computed. ``opponents`` (names, so that worker processes
    can build them) fills the other seats: one name for all, a list in seat order or a mapping
    seat -> name, or their text forms (``OpponentsSpec``); None or ``archetypes``: the world's
    archetypes; ``self``: each evaluated policy in every seat. ``judge_mode="rule"`` plays judge
    mode; ``judge`` names a model judge (``llm:openai:<model>@<base_url>``) to add to the rules.
    ``backend``: ``process`` (a local process pool of ``workers``) or ``ray`` (Ray tasks: a local
    Ray instance with ``workers`` CPUs, or the running cluster at ``ray_address``, e.g. ``auto``
    or ``ray://head:10001``). The rows are the same whatever the backend.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if ray_address is not None and backend != "ray":
        raise ValueError("ray_address needs backend='ray'")
    for p in policies:
        make_policy(p)  # fail fast on an unknown name, before any worker starts
    spec = OpponentsSpec.parse(opponents)
    names = () if spec.self_play else spec.names  # self-play: the evaluated policies themselves
    for name in names:
        if name != DEFAULT_OPPONENTS:
            make_policy(name)
    if judge_mode not in JUDGE_MODES:
        raise ValueError(f"unknown judge_mode {judge_mode!r}; expected one of {', '.join(JUDGE_MODES)}")
    if judge not in (None, "rule"):
        if judge_mode == "none":
            raise ValueError("a judge scores pitches in judge mode only: use judge_mode='rule'")
        if not str(judge).startswith("llm:"):
            raise ValueError(f"unknown judge {judge!r}; expected rule or llm:openai:<model>@<base_url>")
        from ..llm.judge import make_judge

        make_judge(str(judge))
    optima = optima if optima is not None else {}
    jobs = [EvalJob(tuple(policies), task, split, seed, keep_replays, optima.get((task, split, seed)), spec,
                    judge_mode, judge) for task in tasks for seed in seeds]
    results: list[EpisodeResult] = []

    def collect(job: EvalJob, out: tuple[list[EpisodeResult], tuple[str, float]]) -> None:
        episodes, optimum = out
        results.extend(episodes)
        optima[(job.task, job.split, job.seed)] = optimum
        if progress:
            progress(len(policies))

    if backend == "ray":
        run_on_ray(_job, jobs, workers, ray_address, collect, names={*policies, *names})
    elif workers <= 1:
        for job in jobs:
            collect(job, _job(job))
    else:
        with ProcessPoolExecutor(max_workers=min(workers, os.cpu_count() or 1, len(jobs) or 1),
                                 mp_context=_pool_context()) as pool:
            futures = {pool.submit(_job, job): job for job in jobs}
            for fut in as_completed(futures):
                collect(futures[fut], fut.result())
    order = {p: i for i, p in enumerate(policies)}
    tasks_order = {t: i for i, t in enumerate(tasks)}
    results.sort(key=lambda r: (tasks_order[r.task], order[r.policy], r.seed))
    return results


def _ray_task(extra: tuple[dict[str, Any], dict[str, Any]], fn: Callable[[Any], Any], job: Any) -> Any:
    """``fn(job)`` in a Ray worker, after registering the driver's run-time policies (``plugins()``)."""
    install_plugins(*extra)
    return fn(job)


def run_on_ray(fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int, address: str | None,
               collect: Callable[[Any, Any], None], *, names: Collection[str] = ()) -> None:
    """Run ``fn(job)`` for every job as a Ray task (``fn`` a module-level function; evaluation's
    worlds, a league's matches) and hand each ``(job, result)`` to ``collect`` as it finishes. With no ``address`` the call starts a private local instance with ``workers`` CPUs
    (never one found through ``RAY_ADDRESS`` or a ``ray start`` on this machine: that needs
    ``address="auto"``); a Ray already initialised in this process is used as it is. What the call
    started it shuts down; on a failure or an interrupt, the tasks still pending are cancelled.
    """
    try:
        import ray
    except ImportError:
        raise ValueError("the ray backend needs Ray: pip install 'gpu-arena[cluster]'") from None
    started = not ray.is_initialized()
    # a local instance this tool starts reports no usage statistics (the user did not ask it to)
    stats_env = "RAY_USAGE_STATS_ENABLED"
    set_stats = started and not address and stats_env not in os.environ
    if set_stats:
        os.environ[stats_env] = "0"
    pending: dict[Any, Any] = {}
    try:
        if started:
            # no dashboard (a web server on a port) and no worker logs echoed into the progress bar
            ray.init(address=address or "local", num_cpus=None if address else max(1, workers),
                     include_dashboard=False, log_to_driver=False, configure_logging=False)
        remote = ray.remote(num_cpus=1)(_ray_task)
        # a Ray worker is a fresh process: the run-time policies (and families) the run names go
        # with the jobs, pickled by Ray (cloudpickle: a script's lambdas and classes travel by value)
        mine, families = plugins()
        prefixes = {n.partition(":")[0] for n in names if ":" in n}
        extra = ({n: f for n, f in mine.items() if n in names}, {p: f for p, f in families.items() if p in prefixes})
        pending = {remote.remote(extra, fn, job): job for job in jobs}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                job = pending.pop(ref)
                collect(job, ray.get(ref))
    finally:
        if ray.is_initialized():
            for ref in pending:  # only left after a failure or an interrupt
                ray.cancel(ref)
            if started:
                ray.shutdown()
        if set_stats:
            os.environ.pop(stats_env, None)


__all__ = ["BACKENDS", "EpisodeResult", "EvalJob", "play_episode", "run_evaluation", "run_on_ray", "usage_rows"]
