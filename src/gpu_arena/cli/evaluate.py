"""``gpu-arena eval``, ``report`` and ``replay``: evaluation runs with their statistics and LLM
ledgers, their reports from the store, and recorded episodes replayed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from ..core.opponents import DEFAULT_OPPONENTS
from ..core.types import MAX_SEED
from .console import console, quiet_libraries
from .eval_tables import print_engines, print_seat_returns, print_usage
from .options import MAX_SEEDS, judge_options, opponents_spec, split_list, task_list


def _play(policies: list[str], tasks: list[str], split: str, seeds: list[int], *, batch: bool,
          **harness: Any) -> list[Any]:
    """Every policy x task x seed: with ``batch``, greedy local checkpoints through the batched
    sampler (:func:`gpu_arena.training.evaluate.evaluate_batched`: a checkpoint's 100 episodes of a
    task in one pass instead of one at a time) and the rest on the harness, after the scripted
    policies so that a bad name fails first; rows in the harness's order."""
    from ..evaluation import run_evaluation

    if not batch:
        return run_evaluation(policies, tasks, split, seeds, **harness)
    from ..training.evaluate import batched_spec, evaluate_batched

    specs = {p: spec for p in policies if (spec := batched_spec(p)) is not None}
    rest = [p for p in policies if p not in specs]
    results = run_evaluation(rest, tasks, split, seeds, **harness) if rest else []
    results += evaluate_batched(specs, tasks, split, seeds, optima=harness.get("optima"),
                                keep_replays=harness.get("keep_replays", False), progress=harness.get("progress"))
    order = {p: i for i, p in enumerate(policies)}
    results.sort(key=lambda r: (tasks.index(r.task), order[r.policy], r.seed))
    return results


def evaluate(
    policies: str = typer.Option("rule_expert,oracle,no_negotiation,random_valid,greedy_hoarder,always_accept",
                                 help="comma-separated policies for the controlled seat"),
    tasks: str = typer.Option("single_trade,market_round,coalition_market", help="comma-separated tasks"),
    split: str = typer.Option("holdout", help="train | holdout"),
    seeds: int = typer.Option(100, min=1, max=MAX_SEEDS, help="seeds 0..N-1 (or with --seed-start)"),
    seed_start: int = typer.Option(0, min=0, max=MAX_SEED, help="first seed"),
    seed_range: str | None = typer.Option(None, "--range", help="holdout seeds of a named range, fixed in advance: "
                                          "validation (from 0) | test (from 10,000) | check (from 20,000)"),
    workers: int = typer.Option(2, min=1, help="worker processes (with --backend ray and no --ray-address: "
                                               "the local Ray instance's CPUs)"),
    backend: str = typer.Option("process", help="process (a local process pool) | ray (Ray tasks: a local "
                                                "instance, or the cluster at --ray-address)"),
    ray_address: str | None = typer.Option(None, help="a running Ray cluster (auto, or ray://head:10001); "
                                                       "every node needs gpu-arena installed"),
    out: str = typer.Option("results.json", help="JSON output ({'results': [...]})"),
    replays: str | None = typer.Option(None, help="also write every episode's replay to this JSONL file"),
    db: str | None = typer.Option(None, help="SQLite store (default .arena/arena.db or $GPU_ARENA_DB)"),
    reference: str | None = typer.Option(None, help="policy compared seed by seed with every other "
                                                     "(default: the first of --policies)"),
    opponents: str = typer.Option(DEFAULT_OPPONENTS, help="the other seats: one policy for all (e.g. "
                                                     "llm:openai:<model>@<base_url>), a list in seat order (a,b,c) "
                                                     "or seat=policy pairs; archetypes: the world's mix; self: "
                                                     "each evaluated policy in every seat (self-play)"),
    judge_mode: str = typer.Option("none", help="none | rule (judge mode: pitches judged against the truth)"),
    judge: str | None = typer.Option(None, help="a model judge added to the rule judge, "
                                                "llm:openai:<model>@<base_url> (turns judge mode on)"),
    wide: bool = typer.Option(False, "--wide", help="every column of the LLM ledger table"),
    verbose: bool = typer.Option(False, "--verbose", help="the libraries' own progress bars and logs (llm:hf: models)"),
    batch: bool = typer.Option(True, "--batch/--no-batch",
                               help="play greedy llm:hf: checkpoints batched, one generate a round for all their "
                                    "episodes (the same rows; no token ledger); with the world's opponents only"),
) -> None:
    """Evaluate policies in the controlled seat against the world's opponents (or --opponents), with
    95% bootstrap CIs, paired per-seed differences against a reference policy, and the LLM ledgers."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..evaluation import aggregate, paired_differences
    from ..evaluation.replay import write_jsonl
    from ..evaluation.report import markdown_table, paired_table
    from ..evaluation.runner import usage_rows
    from ..evaluation.store import connect, load_optima, save_optima, save_run, save_usage

    pol, tsk = split_list(policies), list(task_list(tasks, "--tasks"))
    if not pol:
        raise typer.BadParameter("--policies names no policy")
    if seed_start + seeds - 1 > MAX_SEED:
        raise typer.BadParameter(f"--seed-start + --seeds must stay within {MAX_SEED} (64-bit seeds)")
    if split not in ("train", "holdout"):
        raise typer.BadParameter("split must be train or holdout")
    if seed_range is not None:
        seed_start = _range_start(seed_range, split, seed_start, seeds)
    seed_list = list(range(seed_start, seed_start + seeds))
    total = len(pol) * len(tsk) * len(seed_list)
    opp = opponents_spec(opponents)
    judge_mode, judge = judge_options(judge_mode, judge)
    for target in (out, replays):  # found unwritable before the episodes run, not after
        if target:
            try:
                Path(target).parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise typer.BadParameter(f"cannot write {target}: {e.strerror}") from None
    con = connect(db)
    optima = load_optima(con)  # the exact optimum of a world is solved once, then read from the store
    t0 = time.perf_counter()
    with Progress(TextColumn("[bold]eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        bar = progress.add_task("episodes", total=total)
        try:
            with quiet_libraries(any("llm:hf:" in spec for spec in (*pol, opponents)), verbose):
                results = _play(pol, tsk, split, seed_list, batch=batch and opp.is_default and judge_mode == "none",
                                workers=workers, keep_replays=bool(replays), optima=optima,
                                progress=lambda n: progress.advance(bar, n),
                                opponents=None if opp.is_default else opp, judge_mode=judge_mode,
                                judge=judge, backend=backend, ray_address=ray_address)
        except ValueError as e:
            raise typer.BadParameter(str(e)) from None
    duration = time.perf_counter() - t0
    rows = aggregate(results)
    ref = reference or pol[0]
    if ref not in pol:
        raise typer.BadParameter(f"--reference {ref!r} is not one of --policies")
    paired = paired_differences(((r.policy, r.task, r.split, r.seed, r.episode_return) for r in results), ref)
    args = {"policies": pol, "tasks": tsk, "split": split, "seeds": seeds, "seed_start": seed_start,
            "workers": workers, "reference": ref}
    if seed_range is not None:
        args["range"] = seed_range
    if backend != "process":
        args["backend"] = backend
        if ray_address:
            args["ray_address"] = ray_address
    if not opp.is_default:
        args["opponents"] = opp.to_value()
    if judge_mode != "none":
        args["judge_mode"] = judge_mode
        args["judge"] = judge or "rule"
    usage = usage_rows(results)
    Path(out).write_text(json.dumps({"results": rows, "paired": paired, "args": args, "duration_s": duration,
                                     "llm_usage": usage}, indent=2))
    if replays:
        write_jsonl(replays, (r.replay for r in results if r.replay))
    save_optima(con, optima)
    run_id = save_run(con, kind="eval", args=args, seeds=seed_list, rows=rows, episodes=results, duration_s=duration)
    save_usage(con, run_id, usage)
    print(markdown_table(rows, escape_html=False))  # a terminal: names as typed
    if paired:
        same = "each policy against itself" if opp.self_play else "same opponents"
        print(f"\nPaired by seed against {ref} (same worlds and shocks, {same}):\n")
        print(paired_table(paired, escape_html=False))
    if opp.self_play:  # every seat is the policy: its seats' returns side by side
        print_seat_returns(results)
    if usage:
        print_usage(usage, wide)
    print_engines(results)
    console.print(f"{total} episodes in {duration:.1f} s; run {run_id} stored; results in {out}")


def _range_start(name: str, split: str, seed_start: int, seeds: int) -> int:
    """The first seed of holdout range ``name`` (gpu_arena.evaluation.ranges), after checking the
    other seed options agree with it (a --seed-start other than the range's would leave the range)."""
    from ..evaluation.ranges import get_range

    try:
        r = get_range(name)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    if split != "holdout":
        raise typer.BadParameter(f"--range {name} names holdout seeds: use --split holdout")
    if seed_start not in (0, r.start):
        raise typer.BadParameter(f"--range {name} starts at seed {r.start:,}; leave --seed-start out")
    if seeds > r.size:
        raise typer.BadParameter(f"--range {name} holds {r.size:,} seeds; asked for {seeds:,}")
    return r.start


def eval_command_line(args: dict[str, object]) -> str:
    """The ``gpu-arena eval`` command that makes a run with these stored arguments."""
    words = ["gpu-arena", "eval"]
    for key, value in args.items():
        if value is None or (key == "seed_start" and value == 0) or (key == "workers" and value == 1):
            continue
        shown = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
        words += [f"--{key.replace('_', '-')}", shown]
    return " ".join(words)


def report(
    run: int | None = typer.Option(None, help="run id (default: the latest evaluation)"),
    out_dir: str = typer.Option("reports", help="where to write report.md, results.png, results.html"),
    db: str | None = typer.Option(None, help="SQLite store"),
    to: str | None = typer.Option(None, help="also write the Markdown report to this file (docs/results.md)"),
) -> None:
    """Render an evaluation run from the store: Markdown table, PNG and interactive HTML chart."""
    from ..evaluation.report import markdown_table, paired_table, write_html, write_png
    from ..evaluation.stats import paired_differences
    from ..evaluation.store import connect, latest_run, load_returns, load_run

    con = connect(db)
    data = load_run(con, run) if run is not None else latest_run(con)
    if data is None:
        raise typer.BadParameter(f"no evaluation run {run} in the store" if run is not None
                                 else "no evaluation run in the store: run `gpu-arena eval` first")
    rows = data["results"]
    title = f"GPU Arena run {data['id']} ({data['created_at']}, commit {str(data['git_commit'])[:8]})"
    out = Path(out_dir)
    # both places are checked before anything is written
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise typer.BadParameter(f"cannot write {out_dir}: {e.strerror}") from None
    if to:
        if Path(to).is_dir():
            raise typer.BadParameter(f"cannot write {to}: it is a directory")
        try:
            Path(to).parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise typer.BadParameter(f"cannot write {to}: {e.strerror}") from None
    seconds = f", {data['duration_s']:.1f} s" if data.get("duration_s") else ""
    md = (f"# {title}\n\nGenerated by `gpu-arena report` from the run made by (commit "
          f"`{data['git_commit']}`{seconds}):\n\n```bash\n{eval_command_line(data['args'])}\n```\n\n"
          f"{markdown_table(rows)}\n")
    ref = data["args"].get("reference") or (data["args"].get("policies") or [None])[0]
    paired = paired_differences(load_returns(con, data["id"]), ref) if ref else []
    if paired:
        md += f"\n## Paired by seed against {ref}\n\n{paired_table(paired)}\n"
    (out / "report.md").write_text(md)
    if to:
        Path(to).write_text(md)
    write_png(rows, out / "results.png", title)
    write_html(rows, out / "results.html", title)
    print(markdown_table(rows, escape_html=False))
    console.print(f"wrote {out / 'report.md'}, {out / 'results.png'}, {out / 'results.html'}")


def replay(
    path: str = typer.Argument(..., help="a replay JSONL file (from `gpu-arena eval --replays`)"),
    index: int = typer.Option(0, min=0, help="which record in the file"),
    check: bool = typer.Option(True, help="re-run the episode and check the transcript is identical"),
) -> None:
    """Print a recorded episode round by round (and verify it replays identically)."""
    from ..evaluation.replay import read_jsonl, replay_episode

    try:
        records = list(read_jsonl(path))
    except OSError as e:
        raise typer.BadParameter(f"cannot read {path}: {e.strerror}") from None
    except (ValueError, RecursionError) as e:  # not JSON lines (UnicodeDecodeError is a ValueError)
        raise typer.BadParameter(f"{path} is not a replay JSONL file: {e}") from None
    if index >= len(records):
        raise typer.BadParameter(f"{path} holds {len(records)} records")
    rec = records[index]
    missing = [k for k in ("policy", "task", "split", "seed", "transcript")
               if not isinstance(rec, dict) or k not in rec]
    if missing:
        raise typer.BadParameter(f"record {index} of {path} is not a replay: it lacks {', '.join(missing)}")
    table = Table()
    for col in ("round", "order", "actions", "results", "rewards"):
        table.add_column(col)
    try:
        for rnd in rec["transcript"]:
            acts = "; ".join(f"{lid}: {a.get('action_type', a.get('rejected'))}"
                             for lid, a in sorted(rnd["actions"].items()))
            res = ", ".join(f"{lid}:{code}" for lid, (_ok, code) in sorted(rnd["results"].items()))
            rew = ", ".join(f"{lid}:{r:+.4f}" for lid, r in sorted(rnd["rewards"].items()))
            # a transcript's strings are a seat's: never rich markup
            table.add_row(str(rnd["round"]), escape(",".join(rnd["order"])), escape(acts), escape(res), rew)
        same = replay_episode(rec).transcript == rec["transcript"] if check else None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise typer.BadParameter(f"record {index} of {path} is not a readable replay: {e!r}") from None
    console.print(f"[bold]{rec['policy']}[/bold] on {rec['task']}/{rec['split']} seed {rec['seed']}")
    console.print(table)
    if check:
        console.print("replay identical" if same else "[red]replay differs from the record[/red]")
        if not same:
            raise typer.Exit(1)
