"""Rendering helpers shared by the commands: the console, tables, and how numbers are written.

Rich draws colours and styles only on a terminal; piped or redirected, the same output comes out as plain
text (no ANSI escape codes) with no trailing spaces on any line, ``COLUMNS`` wide, else ``PLAIN_WIDTH`` (120).
Every command is laid out to fit 80 columns (``COLUMNS=80`` shows it), but a pipe keeps 120 when ``COLUMNS``
is unset: what goes to a pipe is mostly read by scripts and ``grep``, which find a line more often the less it
is wrapped, and which have relied on that width.

Tables (``table``) never break a word while any column has room to spare: a column that wraps does so at
spaces and is narrowed no further than its longest word before the others give up their slack; only a single
token longer than any width left to it (a long file path) is folded. Listings whose entries carry a long text
(``zoo recipes``, ``zoo plugins``, ``zoo list``) put it under the entry's line, indented, at the full width.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO, Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.table import Table
from rich.text import Text

PLAIN_WIDTH = 120
"""Columns of output that goes to a pipe or a file when ``COLUMNS`` is unset (see the module's docstring)."""


class TrimmedLines:
    """A text stream that writes to ``out`` with the spaces at the end of each line taken off: rich pads table
    cells and lines to the console's width, which a pipe or a file should not receive. Only line ends are
    trimmed; spaces inside a line, and spaces a later write continues on the same line, are kept."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._pending = ""  # spaces at the end of the last write, kept until the line goes on or ends

    def write(self, text: str) -> int:
        lines = (self._pending + text).split("\n")
        last = lines[-1].rstrip(" ")
        self._pending = lines[-1][len(last) :]
        self._out.write("\n".join([line.rstrip(" ") for line in lines[:-1]] + [last]))
        return len(text)

    def flush(self) -> None:
        self._out.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self._out, "encoding", None) or "utf-8"


def console() -> Console:
    """A console on the current stdout (created per command, so test runners can capture it): a terminal's
    width and styles; piped, ``COLUMNS`` or ``PLAIN_WIDTH`` columns and lines without trailing spaces."""
    if sys.stdout.isatty():
        return Console(highlight=False)
    width = None if os.environ.get("COLUMNS", "").isdigit() else PLAIN_WIDTH
    return Console(highlight=False, width=width, file=TrimmedLines(sys.stdout))  # type: ignore[arg-type]


class FittedTable(Table):
    """A rich ``Table`` that, when its columns are too wide together, narrows the widest column that may wrap,
    a column at a time, but none below its longest word (its minimum width); only when that is not enough
    does it fall back to rich's own narrowing, which folds words."""

    def _calculate_column_widths(self, console: Console, options: ConsoleOptions) -> list[int]:
        ranges = [self._measure_column(console, options, column) for column in self.columns]
        widths = [r.maximum or 1 for r in ranges]
        excess = sum(widths) - options.max_width
        if excess <= 0:
            return super()._calculate_column_widths(console, options)
        floors = [
            width if column.no_wrap or column.width is not None else max(r.minimum, 1)
            for width, r, column in zip(widths, ranges, self.columns, strict=True)
        ]
        while excess > 0:
            slack = [i for i, (width, floor) in enumerate(zip(widths, floors, strict=True)) if width > floor]
            if not slack:
                return super()._calculate_column_widths(console, options)  # a word longer than any room left
            widths[max(slack, key=lambda i: widths[i])] -= 1
            excess -= 1
        return widths


def table(title: str | None, *columns: str, right: tuple[str, ...] = (), whole: tuple[str, ...] = ()) -> Table:
    """A table with ``columns``; those in ``right`` are right-aligned (numbers), those in ``whole`` never wrap
    (names, numbers). Other columns wrap at spaces, folding only a token longer than the column (``FittedTable``
    keeps columns at least as wide as their longest word where the console allows)."""
    t = FittedTable(title=title, box=box.SIMPLE_HEAD, title_justify="left", title_style="bold", pad_edge=False)
    for name in columns:
        t.add_column(name, justify="right" if name in right else "left", overflow="fold", no_wrap=name in whole)
    return t


def aligned(rows: Sequence[Sequence[str | Text]], right: Sequence[int] = (), gap: int = 2) -> list[Text]:
    """Rows of short cells (names, numbers) as lines of text, each column as wide as its widest cell (those at
    the indices in ``right`` right-aligned), ``gap`` spaces apart: the head lines of a listing whose entries
    carry a longer text underneath, so that the text can take the full width."""
    cells = [[c if isinstance(c, Text) else Text(c) for c in row] for row in rows]
    columns = max((len(row) for row in cells), default=0)
    widths = [max(cell_len(row[i].plain) for row in cells if i < len(row)) for i in range(columns)]
    lines = []
    for row in cells:
        line = Text()
        for i, cell in enumerate(row):
            pad = " " * (widths[i] - cell_len(cell.plain))
            line.append_text(Text(" " * gap) if i else Text())
            line.append_text(Text.assemble(pad, cell) if i in right else Text.assemble(cell, pad))
        line.rstrip()
        lines.append(line)
    return lines


def count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def short(n: float | None, unit: str = "") -> str:
    """``124.4 M``, ``46.7 B``: decimal prefixes for counts (parameters, FLOPs)."""
    if n is None:
        return "-"
    for size, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G" if unit else "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"{n / size:.2f} {prefix}{unit}"
    return f"{n:.0f} {unit}".rstrip()


def size(n: int | None) -> str:
    """``237.35 MiB``: binary prefixes for bytes."""
    if n is None:
        return "-"
    value = float(n)
    for prefix in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or prefix == "TiB":
            return f"{value:.0f} {prefix}" if prefix == "B" else f"{value:.2f} {prefix}"
        value /= 1024
    raise AssertionError("unreachable")


def share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def plain(value: Any) -> str:
    """A config default as a recipe would spell it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
