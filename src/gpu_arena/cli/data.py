"""``gpu-arena data sft``: training data from scripted policies."""

from __future__ import annotations

import typer

from ..core.types import MAX_SEED  # world seeds: 64-bit, as every store keeps them
from .console import console
from .options import MAX_SEEDS, task_list
from .train_checks import check_finite, check_opponents, check_output, fail

data_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Training data from scripted policies.")


@data_app.command("sft")
def data_sft(
    output: str = typer.Option(..., "--output", "-o", help="directory for dataset/, sft.jsonl, provenance.json"),
    policy: str = typer.Option("rule_expert", help="scripted policy that plays the seat (rule_expert, oracle, ...)"),
    task: str = typer.Option("single_trade", "--task", "--tasks", help="comma-separated tasks"),
    split: str = typer.Option("train", help="train | holdout"),
    seeds: int = typer.Option(100, min=1, max=MAX_SEEDS, help="seeds seed_start..seed_start+N-1 of every task"),
    seed_start: int = typer.Option(0, min=0, max=MAX_SEED, help="first seed"),
    mode: str = typer.Option("tools", help="tools (function calls) | json (one JSON object per answer) | compact "
                             "(function calls, short prompt, one turn shown: pretrained tokenizers)"),
    opponents: str | None = typer.Option(None, help="one policy for every other seat (default: the world's archetypes)"),
    min_return: float | None = typer.Option(None, help="keep only episodes with at least this return"),
    top_fraction: float | None = typer.Option(None, help="keep only the best fraction of episodes per task"),
) -> None:
    """Play episodes with a scripted policy and write them as chats in the LLM agents' format."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..training.data import DataError, SFTDataSpec, build_sft_records, save_sft_data

    check_finite("--min-return", min_return)
    spec = SFTDataSpec(policy=policy, tasks=task_list(task, "--task"), split=split, seeds=tuple(range(seed_start, seed_start + seeds)),
                       mode=mode, opponents=check_opponents(opponents), min_return=min_return, top_fraction=top_fraction)
    try:
        spec.validate()
        check_output("--output", output)  # found unwritable before the episodes are played, not after
        with Progress(TextColumn("[bold]episodes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as progress:
            bar = progress.add_task("play", total=len(spec.tasks) * len(spec.seeds))
            records, provenance = build_sft_records(spec, progress=lambda n: progress.advance(bar, n))
    except DataError as e:
        raise fail(e) from None
    try:
        paths = save_sft_data(records, provenance, output)
    except OSError as e:
        raise typer.BadParameter(f"cannot write --output {output}: {e.strerror or e}") from None
    console.print(f"{provenance['episodes_kept']} of {provenance['episodes_played']} episodes kept (mean return "
                  f"{provenance['mean_return_kept']:+.4f}, played {provenance['mean_return_played']:+.4f}); "
                  f"wrote {paths['dataset']}, {paths['jsonl']}, {paths['provenance']}")

