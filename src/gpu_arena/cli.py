"""The ``gpu-arena`` command."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from .cli_options import MAX_SEEDS, split_list, task_list
from .console import console, quiet_libraries
from .core.tasks import task_params
from .core.types import ACTION_TYPES, COMPONENT_COLUMNS, MAX_SEED, REWARD_COLUMNS, TASKS
from .eval_tables import print_seat_returns, print_usage

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's


app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="GPU Arena: AI labs bargain for scarce GPUs before a deadline.")


@app.command()
def demo(
    task: str = typer.Option("market_round", help="single_trade | market_round | coalition_market"),
    seed: int = typer.Option(7, help="world seed"),
    split: str = typer.Option("train", help="train | holdout"),
    policy: str = typer.Option("rule_expert", help="policy driving the controlled seat (lab_0)"),
    opponents: str = typer.Option("archetypes", help="policy for every other seat (archetypes: the world's mix)"),
    as_json: bool = typer.Option(False, "--json", help="print the transcript and metrics as JSON"),
) -> None:
    """Play one episode in-process and show every round: actions, results and reward columns."""
    from .env import GpuArenaEnv
    from .policies import make_policy
    from .rollout import play_seat

    env = GpuArenaEnv()
    try:
        obs = env.reset(seed=seed, task=task, split=split, opponents=opponents)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    try:
        driver = make_policy(policy, seed=seed)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    episode = env.episode
    assert episode is not None
    table = Table(title=f"{task}/{split} seed {seed}: lab_0 = {policy}, others = {opponents}")
    for col in ("round", "lab_0 action", "result", "reward", "largest component", "others"):
        table.add_column(col)
    def row(action: Any, obs: Any) -> None:
        br = obs.reward_breakdown
        top = max(COMPONENT_COLUMNS, key=lambda c: abs(br[c]))
        others = ", ".join(f"{lid}:{r.code if not r.ok else 'ok'}" for lid, r in sorted(episode.last_results.items())
                           if lid != "lab_0")
        res = obs.last_action_result
        table.add_row(str(obs.round_index), escape(_action_parts(action)[0]), "ok" if res.ok else res.code,
                      f"{obs.reward:+.4f}", f"{top} {br[top]:+.4f}", others)

    played = play_seat(env, driver, obs, on_step=row)
    total, obs = played.episode_return, played.last or obs
    metrics = env.metrics()
    if as_json:
        print(json.dumps({"transcript": episode.transcript, "metrics": metrics}, indent=2, default=str))
        return
    console.print(table)
    lab = metrics["labs"]["lab_0"]
    console.print(f"return {total:+.4f} (= surplus over BATNA {lab['surplus_over_batna']:+.2f} / scale "
                  f"{obs.reward_scale:.2f} + penalties); welfare {metrics['welfare']:.2f} of optimum "
                  f"{metrics['optimum']:.2f} ({metrics['welfare_ratio']:.1%})")


@app.command("eval")
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
    opponents: str = typer.Option("archetypes", help="the other seats: one policy for all (e.g. "
                                                     "llm:openai:<model>@<base_url>), a list in seat order (a,b,c) "
                                                     "or seat=policy pairs; archetypes: the world's mix; self: "
                                                     "each evaluated policy in every seat (self-play)"),
    judge_mode: str = typer.Option("none", help="none | rule (judge mode: pitches judged against the truth)"),
    judge: str | None = typer.Option(None, help="a model judge added to the rule judge, "
                                                "llm:openai:<model>@<base_url> (turns judge mode on)"),
    wide: bool = typer.Option(False, "--wide", help="every column of the LLM ledger table"),
    verbose: bool = typer.Option(False, "--verbose", help="the libraries' own progress bars and logs (llm:hf: models)"),
) -> None:
    """Evaluate policies in the controlled seat against the world's opponents (or --opponents), with
    95% bootstrap CIs, paired per-seed differences against a reference policy, and the LLM ledgers."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .evaluation import aggregate, paired_differences, run_evaluation
    from .evaluation.replay import write_jsonl
    from .evaluation.report import markdown_table, paired_table
    from .evaluation.runner import SELF_PLAY, usage_rows
    from .evaluation.store import connect, load_optima, save_optima, save_run, save_usage

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
    opp = _seat_spec(opponents)
    judge_mode, judge = _judge_options(judge_mode, judge)
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
                results = run_evaluation(pol, tsk, split, seed_list, workers=workers, keep_replays=bool(replays),
                                         optima=optima, progress=lambda n: progress.advance(bar, n),
                                         opponents=None if opp == "archetypes" else opp, judge_mode=judge_mode,
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
    if opp != "archetypes":
        args["opponents"] = opp
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
        same = "each policy against itself" if opp == SELF_PLAY else "same opponents"
        print(f"\nPaired by seed against {ref} (same worlds and shocks, {same}):\n")
        print(paired_table(paired, escape_html=False))
    if opp == SELF_PLAY:  # every seat is the policy: its seats' returns side by side
        print_seat_returns(results)
    if usage:
        print_usage(usage, wide)
    console.print(f"{total} episodes in {duration:.1f} s; run {run_id} stored; results in {out}")


def _range_start(name: str, split: str, seed_start: int, seeds: int) -> int:
    """The first seed of holdout range ``name`` (gpu_arena.evaluation.ranges), after checking the
    other seed options agree with it (a --seed-start other than the range's would leave the range)."""
    from .evaluation.ranges import get_range

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


@app.command()
def report(
    run: int | None = typer.Option(None, help="run id (default: the latest evaluation)"),
    out_dir: str = typer.Option("reports", help="where to write report.md, results.png, results.html"),
    db: str | None = typer.Option(None, help="SQLite store"),
    to: str | None = typer.Option(None, help="also write the Markdown report to this file (docs/results.md)"),
) -> None:
    """Render an evaluation run from the store: Markdown table, PNG and interactive HTML chart."""
    from .evaluation.report import markdown_table, paired_table, write_html, write_png
    from .evaluation.stats import paired_differences
    from .evaluation.store import connect, latest_run, load_returns, load_run

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


@app.command()
def replay(
    path: str = typer.Argument(..., help="a replay JSONL file (from `gpu-arena eval --replays`)"),
    index: int = typer.Option(0, min=0, help="which record in the file"),
    check: bool = typer.Option(True, help="re-run the episode and check the transcript is identical"),
) -> None:
    """Print a recorded episode round by round (and verify it replays identically)."""
    from .evaluation.replay import read_jsonl, replay_episode

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


@app.command()
def tasks() -> None:
    """List the tasks with their sizes per split."""
    table = Table(title="tasks")
    for col in ("task", "split", "labs", "rounds", "jobs/lab", "blocks/lab", "shocks"):
        table.add_column(col)
    for t in TASKS:
        for s in ("train", "holdout"):
            p = task_params(t, s)
            table.add_row(t, s, *(f"{lo}-{hi}" for lo, hi in (p.n_labs, p.rounds, p.jobs_per_lab,
                                                               p.blocks_per_lab, p.n_shocks)))
    console.print(table)


@app.command()
def schema() -> None:
    """Print the action types, reward columns and the action JSON schema."""
    from .models import ArenaAction

    print(json.dumps({"action_types": list(ACTION_TYPES), "reward_columns": list(REWARD_COLUMNS),
                      "action_schema": ArenaAction.model_json_schema()}, indent=2))


@app.command()
def serve(
    host: str | None = typer.Option(None, help="interface to bind (default $GPU_ARENA_HOST or 127.0.0.1)"),
    port: int | None = typer.Option(None, min=0, max=65535, help="port (default $GPU_ARENA_PORT or 8000)"),
    max_sessions: int | None = typer.Option(None, min=1, help="concurrent sessions per API (default 64)"),
    db: str | None = typer.Option(None, help="SQLite store for finished episodes (default .arena/arena.db)"),
    log_level: str = typer.Option("info", help=f"uvicorn log level: {' | '.join(LOG_LEVELS)}"),
    judge: str | None = typer.Option(None, help="model judge for sessions in judge mode: "
                                                "llm:openai:<model>@<base_url> (default $GPU_ARENA_JUDGE or rule)"),
    auto_eval: bool | None = typer.Option(None, "--auto-eval/--no-auto-eval",
                                          help="when the store holds no evaluation run, fill it with a quick one in "
                                               "the background (default on; $GPU_ARENA_AUTO_EVAL=0 turns it off)"),
) -> None:
    """Serve the arena: OpenEnv WebSocket sessions at /ws, REST sessions at /api, docs at /docs."""
    import os

    from .server.settings import ServerSettings

    if log_level.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"--log-level must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    try:
        settings = ServerSettings.from_env(host=host, port=port, max_sessions=max_sessions, db=db, judge=judge,
                                           auto_eval=auto_eval)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    if auto_eval is None and "GPU_ARENA_AUTO_EVAL" not in os.environ:
        settings = settings.with_(auto_eval=True)  # the first `make run` shows real numbers (off in the library)
    from .server.app import serve as run_server

    console.print(f"GPU Arena on http://{settings.host}:{settings.port} (docs at /docs, WebSocket at /ws); "
                  f"up to {settings.max_sessions} sessions, idle timeout {settings.idle_timeout_s:g} s")
    if settings.auto_eval:
        console.print("if the store holds no evaluation run, a quick one fills it in the background "
                      "(the dashboard shows its progress; --no-auto-eval skips it)")
    run_server(settings, log_level=log_level.lower())


def _judge_options(judge_mode: str, judge: str | None) -> tuple[str, str | None]:
    """``--judge`` turns judge mode on; ``rule`` (or nothing) means the rule judge alone."""
    if judge_mode not in ("none", "rule"):
        raise typer.BadParameter(f"--judge-mode must be none or rule, got {judge_mode!r}")
    if judge in (None, "", "rule"):
        return judge_mode, None
    if not judge.startswith("llm:"):
        raise typer.BadParameter(f"unknown judge {judge!r}; expected rule or llm:openai:<model>@<base_url>")
    return "rule", judge


def _seat_spec(value: str) -> str | list[str] | dict[str, str]:
    """``name`` for every other seat, ``a,b,c`` in seat order, or ``lab_1=name,lab_2=name``."""
    items = split_list(value)
    # a seat=policy pair starts with a seat id; an LLM name's options (?mode=json) also hold '='
    if any(re.match(r"lab_\d+=", x) for x in items):
        pairs = [x.split("=", 1) for x in items]
        if any(len(p) != 2 or not p[0] or not p[1] for p in pairs):
            raise typer.BadParameter(f"expected seat=policy pairs, got {value!r}")
        return {k.strip(): v.strip() for k, v in pairs}
    return items if len(items) > 1 else (items[0] if items else "archetypes")


def _action_parts(action: object) -> tuple[str, dict[str, Any]]:
    """An action's type and its other non-default fields, as the terminal shows them; a move the
    engine refuses before its rules read it is ``[code]`` with no fields."""
    from .core.engine import action_record
    from .core.serialize import coerce_action
    from .core.types import RejectedAction

    if isinstance(action, RejectedAction):
        return f"[{action.code}]", {}
    core = coerce_action(action)
    if isinstance(core, RejectedAction):
        return f"[{core.code}]", {}
    record = action_record(core)
    if isinstance(record, RejectedAction):
        return f"[{record.code}]", {}
    return str(core.action_type), {k: v for k, v in record.items() if k != "action_type"}


def _action_text(action: object) -> str:
    kind, args = _action_parts(action)
    return kind + (" " + json.dumps(args) if args else "")


@app.command()
def play(
    task: str = typer.Option("single_trade", help="single_trade | market_round | coalition_market"),
    seed: int = typer.Option(7, help="world seed"),
    split: str = typer.Option("train", help="train | holdout"),
    seat: str = typer.Option("lab_0", help="the seat you (or --me) play"),
    me: str = typer.Option("human", help="'human' (type actions) or any policy name, e.g. "
                                         "llm:openai:<model>@<base_url> or rule_expert"),
    opponents: str = typer.Option("archetypes", help="one policy for every other seat, a list in seat order "
                                                     "(a,b,c) or seat=policy pairs (lab_1=llm:hf:<path>,lab_2=selfish)"),
    judge_mode: str = typer.Option("none", help="none | rule"),
    judge: str | None = typer.Option(None, help="a model judge added to the rule judge, "
                                                "llm:openai:<model>@<base_url> (turns judge mode on)"),
) -> None:
    """Play one episode in the terminal against any mix of seats (scripted, LLM or you)."""
    from rich.panel import Panel
    from rich.text import Text

    from .core.worldgen import generate_world, world_seed
    from .env import GpuArenaEnv
    from .llm import ChatAgent, FormatError, json_mode_instruction, parse_action, render_turn
    from .llm.prompts import RenderMemory
    from .policies import make_policy
    from .rollout import play_seat

    judge_mode, judge = _judge_options(judge_mode, judge)
    try:
        world = generate_world(task, split, seed, judge_mode=judge_mode)
        spec = _seat_spec(opponents)
        others = [lid for lid in world.labs if lid != seat]
        if seat not in world.labs:
            raise ValueError(f"unknown seat {seat!r}; this world has {', '.join(world.labs)}")
        if isinstance(spec, str):
            names: dict[str, str] = {lid: spec for lid in others}
        elif isinstance(spec, list):
            if len(spec) != len(others):
                raise ValueError(f"{len(spec)} opponents for {len(others)} seats ({', '.join(others)})")
            names = dict(zip(others, spec, strict=True))
        else:
            names = {lid: spec.get(lid, "archetypes") for lid in others}
        # built here (as the environment would) so their LLM ledgers can be shown at the end
        seats = {lid: make_policy(world.labs[lid].archetype if n == "archetypes" else n,
                                  seed=world_seed(f"policy:{lid}", split, seed), **world.labs[lid].params)
                 for lid, n in names.items()}
        driver = None if me == "human" else make_policy(me, seed=seed)
        env = GpuArenaEnv(task=task, split=split, seat=seat, opponents=seats, judge_mode=judge_mode, judge=judge)
        obs = env.reset(seed=seed)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    episode = env.episode
    assert episode is not None
    console.print(f"[bold]{task}/{split} seed {seed}[/bold]: you are {seat} ({me}); "
                  + ", ".join(f"{lid}: {n}" for lid, n in names.items()))
    memory = RenderMemory()
    stopped = False

    def choose(view: Any, obs: Any) -> Any:
        nonlocal stopped
        if driver is None:
            console.print(Panel(Text(render_turn(view, memory)), title=f"round {obs.round_index}", expand=False))
            while True:
                try:
                    text = typer.prompt("action (JSON, an action type, '?' for the list, 'q' to quit)")
                except (typer.Abort, EOFError):
                    text = "q"
                text = text.strip()
                if text == "?":
                    console.print(json_mode_instruction(), markup=False)
                    continue
                if text == "q":
                    stopped = True
                    return None
                action = parse_action(json.dumps({"action_type": text}) if text.isidentifier() else text)
                if isinstance(action, FormatError):
                    console.print(f"[red]{action.code}[/red]: {escape(str(action.message))}")
                    continue
                return action
        action = driver.act(view)
        if isinstance(driver, ChatAgent):
            conv = driver.conversation(seat)
            reply = conv.transcript[-1] if conv else {}
            said = reply.get("content") or json.dumps([c["function"] for c in reply.get("tool_calls") or []])
            console.print(Panel(Text(str(said)[:600]), title=f"{seat} says (round {obs.round_index})", expand=False))
        return action

    def show(_action: Any, _obs: Any) -> None:
        rnd = episode.transcript[-1]
        table = Table(title=f"round {rnd['round']} (order {', '.join(rnd['order'])})")
        for col in ("seat", "policy", "action", "result", "reward"):
            table.add_column(col)
        for lid in episode.world.labs:
            act = rnd["actions"].get(lid, {})
            shown = f"[{act['rejected']}]" if "rejected" in act else _action_text(act) if act else "-"
            ok, code = rnd["results"].get(lid, [True, "-"])
            table.add_row(lid + (" *" if lid == seat else ""), escape(me if lid == seat else names[lid]), escape(shown),
                          "ok" if ok else f"[red]{code}[/red]", f"{rnd['rewards'].get(lid, 0.0):+.4f}")
        console.print(table)

    total = play_seat(env, driver, obs, choose=choose, on_step=show).episode_return
    if stopped:
        console.print("stopped")
        return
    metrics = env.metrics()
    lab = metrics["labs"][seat]
    console.print(f"[bold]return {total:+.4f}[/bold]; surplus over BATNA {lab['surplus_over_batna']:+.2f}; "
                  f"welfare {metrics['welfare']:.2f} of optimum {metrics['optimum']:.2f} ({metrics['welfare_ratio']:.1%})")
    agents: dict[str, object] = {lid: p for lid, p in [(seat, driver), *seats.items()] if isinstance(p, ChatAgent)}
    if env.judge is not None and hasattr(env.judge, "ledger"):
        agents["judge"] = env.judge
    if agents:
        table = Table(title="LLM ledgers")
        for col in ("seat", "calls", "prompt tok/call", "completion tok/call", "model s/call", "format errors"):
            table.add_column(col)
        for lid, agent in agents.items():
            d = agent.ledger.to_dict()  # type: ignore[attr-defined]
            table.add_row(lid, str(d["calls"]), f"{d['prompt_tokens_per_call']:.0f}",
                          f"{d['completion_tokens_per_call']:.0f}", f"{d['model_s_per_call']:.2f}",
                          str(d["format_errors"]))
        console.print(table)


@app.command()
def policies() -> None:
    """List the registered policies (and name families such as llm:openai:<model>@<base_url>)."""
    from .policies import policy_families, policy_names

    for name in policy_names():
        console.print(name)
    for prefix in policy_families():
        console.print(f"{prefix}:...", markup=False)


# training (issue #7): `data sft`, `train sft|grpo|prepare`, `runs`; the sub-apps import only typer
# and rich, the training stack loads inside each command
from .training.cli import data_app, runs_app, train_app  # noqa: E402

app.add_typer(data_app, name="data")
app.add_typer(train_app, name="train")
app.add_typer(runs_app, name="runs")

# the league (issue #19): `league run|show`; OpenSkill and the store load inside each command
from .league.cli import league_app  # noqa: E402

app.add_typer(league_app, name="league")


def main() -> None:
    """The ``gpu-arena`` command: the app, with what lies outside the command's arguments reported
    as one line and exit status 1 rather than a traceback: a model endpoint that cannot be reached
    (an LLM policy or judge), a store file that cannot be opened or is not a SQLite database."""
    try:
        app()
    except Exception as e:
        # imported here, not at start-up: the evaluation package costs a third of a second to load,
        # and a command that raised one of these has loaded its module already
        from .evaluation.store import StoreError
        from .llm.agents import LLMUnavailableError

        if isinstance(e, LLMUnavailableError):
            console.print(f"[red]error:[/red] a language model could not be reached: {e}")
        elif isinstance(e, StoreError):
            console.print(f"[red]error:[/red] {e}")
        else:
            raise
        raise SystemExit(1) from None


if __name__ == "__main__":  # pragma: no cover
    main()
