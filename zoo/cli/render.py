"""Rendering helpers shared by the commands: the console, tables, and how numbers are written.

Rich draws colours and styles only on a terminal; piped or redirected, the same tables come out as plain
text (no ANSI escape codes), 120 columns wide unless ``COLUMNS`` says otherwise.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

PLAIN_WIDTH = 120


def console() -> Console:
    """A console on the current stdout (created per command, so test runners can capture it)."""
    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PLAIN_WIDTH
    return Console(highlight=False, width=width)


def table(title: str | None, *columns: str, right: tuple[str, ...] = (), whole: tuple[str, ...] = ()) -> Table:
    """A table with ``columns``; those in ``right`` are right-aligned (numbers), those in ``whole`` never wrap."""
    t = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", title_style="bold", pad_edge=False)
    for name in columns:
        t.add_column(name, justify="right" if name in right else "left", overflow="fold", no_wrap=name in whole)
    return t


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
