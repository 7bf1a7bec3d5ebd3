"""The ``gpu-arena`` command: its Typer app, each command registered from the module that holds
it, and :func:`main`, the console script."""

from __future__ import annotations

import typer

from .console import console
from .data import data_app
from .evaluate import evaluate, replay, report
from .info import info, policies, schema, tasks
from .league import league_app
from .play import demo, play
from .runs import runs_app
from .serve import serve
from .train import train_app

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="GPU Arena: AI labs bargain for scarce GPUs before a deadline.")

# in the order `gpu-arena --help` lists them
app.command()(demo)
app.command("eval")(evaluate)
app.command()(report)
app.command()(replay)
app.command()(tasks)
app.command()(schema)
app.command()(serve)
app.command()(play)
app.command()(policies)
app.command()(info)
# training (issue #7): `data sft`, `train sft|grpo|rft|pipeline|...`, `runs`; the sub-apps import only
# typer and rich, the training stack loads inside each command
app.add_typer(data_app, name="data")
app.add_typer(train_app, name="train")
app.add_typer(runs_app, name="runs")
# the league (issue #19): `league run|show`; OpenSkill and the store load inside each command
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
        from ..evaluation.store import StoreError
        from ..llm.agents import LLMUnavailableError

        if isinstance(e, LLMUnavailableError):
            console.print(f"[red]error:[/red] a language model could not be reached: {e}")
        elif isinstance(e, StoreError):
            console.print(f"[red]error:[/red] {e}")
        else:
            raise
        raise SystemExit(1) from None


if __name__ == "__main__":  # pragma: no cover
    main()
