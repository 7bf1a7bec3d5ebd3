"""``gpu-arena league run|show``: a rated league of any policies, in the terminal or as JSON."""

from __future__ import annotations

import json
from typing import Any

import typer

from ..core.types import MAX_SEED
from .console import FitTable, console
from .options import split_list

MAX_MATCHES = 100_000  # per call: the schedule is built before the first match

league_app = typer.Typer(help="A rated league: entrants meet in rotating seats; OpenSkill ratings and cross-play.",
                         no_args_is_help=True)


@league_app.command("run")
def league_run(
    entrants: str = typer.Option(..., help="comma-separated policy names (scripted, llm:hf:DIR, llm:openai:...)"),
    tasks: str = typer.Option("market_round", help="comma-separated tasks, played in turn"),
    matches: int = typer.Option(200, min=1, max=MAX_MATCHES,
                                help="matches to add (a second run with the same arguments adds more)"),
    seed: int = typer.Option(0, min=0, max=MAX_SEED, help="the league's seed: its worlds and seatings"),
    workers: int = typer.Option(1, min=1, help="worker processes (or Ray CPUs of a private local instance)"),
    backend: str = typer.Option("process", help="process | ray (as gpu-arena eval)"),
    ray_address: str | None = typer.Option(None, help="a running Ray cluster (auto, or ray://head:10001)"),
    db: str | None = typer.Option(None, help="SQLite store (default .arena/arena.db or $GPU_ARENA_DB)"),
    as_json: bool = typer.Option(False, "--json", help="print the table as JSON"),
    wide: bool = typer.Option(False, "--wide", help="every column"),
) -> None:
    """Play the next matches of a league and print its table."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..core.types import TASKS
    from ..league import run_league

    names, task_list = split_list(entrants), split_list(tasks)
    bad = [t for t in task_list if t not in TASKS]
    if bad or not task_list:
        raise typer.BadParameter(f"unknown task {', '.join(bad) or '(none)'}; expected {', '.join(TASKS)}")
    with Progress(TextColumn("[bold]league"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=as_json) as progress:
        bar = progress.add_task("matches", total=matches)
        try:
            table = run_league(names, task_list, matches, seed, db=db, workers=workers, backend=backend,
                               ray_address=ray_address, progress=lambda n: progress.advance(bar, n))
        except (KeyError, ValueError) as e:
            raise typer.BadParameter(str(e)) from None
    _show(table, as_json, wide)


@league_app.command("show")
def league_show(
    league: str | None = typer.Option(None, help="which league (default: the newest)"),
    db: str | None = typer.Option(None, help="SQLite store (default .arena/arena.db or $GPU_ARENA_DB)"),
    as_json: bool = typer.Option(False, "--json", help="print the table as JSON"),
    wide: bool = typer.Option(False, "--wide", help="every column"),
    cross_play: bool = typer.Option(False, "--cross-play", help="also each pairing's mean surplus"),
) -> None:
    """Print a league's ratings (mu, sigma, conservative score), matches and mean surplus."""
    from ..league import league_table

    try:
        table = league_table(db, league)
    except LookupError as e:
        console.print(str(e))
        raise typer.Exit(1) from None
    _show(table, as_json, wide, cross_play)


def _show(table: dict[str, object], as_json: bool, wide: bool, cross_play: bool = False) -> None:
    if as_json:
        print(json.dumps(table, indent=2))
        return
    rows: list[dict[str, object]] = table["entrants"]  # type: ignore[assignment]
    tasks = ", ".join(table["tasks"])  # type: ignore[arg-type]
    out = FitTable(f"League: {tasks}, seed {table['seed']}, {table['total']} matches",
                   ("#", "entrant", "mu", "sigma", "score", "matches", "surplus", "self-play", "deals", "gain share",
                    "IR viol.", "not Pareto"),
                   wide_only=("self-play", "deals", "gain share", "IR viol.", "not Pareto"),
                   numeric=("#", "mu", "sigma", "score", "matches", "surplus", "self-play", "deals", "gain share",
                            "IR viol.", "not Pareto"), wide=wide)
    for i, r in enumerate(rows, 1):
        selfp = r["self_play"]["mean"]  # type: ignore[index]
        bargaining: dict[str, Any] = r["bargaining"]  # type: ignore[assignment]
        share = bargaining["gain_share"]["mean"]
        out.add_row(str(i), str(r["name"]), f"{r['mu']:.2f}", f"{r['sigma']:.2f}", f"{r['conservative']:.2f}",
                    str(r["matches"]), "–" if r["mean_surplus"] is None else f"{r['mean_surplus']:+.2f}",
                    "–" if selfp is None else f"{selfp:+.2f}", str(bargaining["deals"]),
                    "–" if share is None else f"{share:.2f}", str(bargaining["ir_violations"]),
                    str(bargaining["not_pareto"]))
    out.print()
    console.print("score = mu − 3·sigma (OpenSkill, Plackett–Luce; ranked by surplus over BATNA per match); "
                  "surplus: mean in cross-play" + ("; gain share: its mean share of each deal's joint gain; IR "
                                                   "viol.: deals that lowered its own potential; not Pareto: deals after which pooling "
                                                   "the two labs' blocks would still have gained" if wide else ""))
    if cross_play:
        pairs = FitTable("Cross-play: the entrant's mean surplus when it met the opponent",
                         ("entrant", "opponent", "surplus", "95% CI", "n"), numeric=("surplus", "95% CI", "n"))
        for c in table["cross_play"]:  # type: ignore[attr-defined]
            low, high = c["ci"]
            pairs.add_row(c["entrant"], c["opponent"], f"{c['mean']:+.2f}", f"[{low:+.2f}, {high:+.2f}]", str(c["n"]))
        pairs.print()
