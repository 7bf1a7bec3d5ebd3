"""The CLI's terminal output: one console, and tables that read in an 80-column terminal.

Rich shrinks every column of a table wider than the terminal and cuts its cells to ``…``, which
left ``gpu-arena runs`` unreadable at 80 columns. A :class:`FitTable` keeps the columns that
matter by default (``--wide`` adds the rest), draws a light box (no vertical rules), and folds a
long cell onto a second line instead of cutting it. Its cells and title are plain text: a name
holding ``[`` or ``&`` is shown as typed, never read as markup.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

console = Console()


def follow_columns() -> None:
    """Size the console by ``$COLUMNS`` as it is now: rich reads it once, when the console is made
    (at import), and never prints wider than that."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():
        console.width = int(columns)


# what hides the libraries' progress bars and info logs in the worker processes a command starts
# (read when transformers / huggingface_hub are imported there)
QUIET_ENV = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}


@contextmanager
def quiet_libraries(models: bool, verbose: bool = False) -> Iterator[None]:
    """While a command plays local models (``models``: an ``llm:hf:`` policy), no third-party progress
    bars ("Loading weights"), info logs or warnings: in this process through the training
    pipeline's :func:`gpu_arena.training.progress.quiet_third_party`, in the worker processes it
    starts through :data:`QUIET_ENV` (a variable the user set is kept). ``verbose`` shows them."""
    if verbose or not models:
        yield
        return
    from ..training.progress import quiet_third_party

    saved: dict[str, str | None] = {name: os.environ.get(name) for name in QUIET_ENV}
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
    try:
        with quiet_third_party():
            yield
    finally:
        for name, before in saved.items():
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before


class FitTable:
    """A table of ``headers``; those in ``wide_only`` are left out unless ``wide``; those in
    ``numeric`` are right-aligned; cells of ``numeric`` and ``whole`` columns never wrap (the other
    columns give way); ``stack_headers`` shows each header's words one under another (narrow columns
    under whole words). ``add_row`` takes a cell for every header, in order."""

    def __init__(self, title: str | None, headers: Sequence[str], *, wide_only: Collection[str] = (),
                 numeric: Collection[str] = (), whole: Collection[str] = (), wide: bool = False,
                 stack_headers: bool = False) -> None:
        unknown = set(wide_only) - set(headers)
        if unknown:
            raise ValueError(f"wide_only names no header: {sorted(unknown)}")
        self.keep = [i for i, h in enumerate(headers) if wide or h not in wide_only]
        self.table = Table(title=None if title is None else Text(title), box=box.SIMPLE_HEAD, title_justify="left",
                           pad_edge=False)
        for i in self.keep:
            h = headers[i]
            self.table.add_column(h.replace(" ", "\n") if stack_headers else h, overflow="fold", justify="right" if h in numeric else "left",
                                  no_wrap=h in numeric or h in whole)
        self.width = len(headers)

    def add_row(self, *cells: str) -> None:
        if len(cells) != self.width:
            raise ValueError(f"{len(cells)} cells for {self.width} columns")
        self.table.add_row(*(Text(cells[i]) for i in self.keep))

    def print(self) -> None:
        follow_columns()
        console.print(self.table)


__all__ = ["QUIET_ENV", "FitTable", "console", "follow_columns", "quiet_libraries"]
