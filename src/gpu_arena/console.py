"""The CLI's terminal output: one console, and tables that read in an 80-column terminal.

Rich shrinks every column of a table wider than the terminal and cuts its cells to ``…``, which
left ``gpu-arena runs`` unreadable at 80 columns. A :class:`FitTable` keeps the columns that
matter by default (``--wide`` adds the rest), draws a light box (no vertical rules), and folds a
long cell onto a second line instead of cutting it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence

from rich import box
from rich.console import Console
from rich.table import Table

console = Console()


def follow_columns() -> None:
    """Size the console by ``$COLUMNS`` as it is now: rich reads it once, when the console is made
    (at import), and never prints wider than that."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():
        console.width = int(columns)


class FitTable:
    """A table of ``headers``; those in ``wide_only`` are left out unless ``wide``; those in
    ``numeric`` are right-aligned; cells of ``numeric`` and ``whole`` columns never wrap (the other
    columns give way). ``add_row`` takes a cell for every header, in order."""

    def __init__(self, title: str | None, headers: Sequence[str], *, wide_only: Collection[str] = (),
                 numeric: Collection[str] = (), whole: Collection[str] = (), wide: bool = False) -> None:
        unknown = set(wide_only) - set(headers)
        if unknown:
            raise ValueError(f"wide_only names no header: {sorted(unknown)}")
        self.keep = [i for i, h in enumerate(headers) if wide or h not in wide_only]
        self.table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
        for i in self.keep:
            h = headers[i]
            self.table.add_column(h, overflow="fold", justify="right" if h in numeric else "left",
                                  no_wrap=h in numeric or h in whole)
        self.width = len(headers)

    def add_row(self, *cells: str) -> None:
        if len(cells) != self.width:
            raise ValueError(f"{len(cells)} cells for {self.width} columns")
        self.table.add_row(*(cells[i] for i in self.keep))

    def print(self) -> None:
        follow_columns()
        console.print(self.table)


__all__ = ["FitTable", "console", "follow_columns"]
