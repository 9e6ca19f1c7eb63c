"""Per-layer parameter rows, runs of identical blocks folded into one: ``blocks.0-11 ×12``.

    rows = fold_layer_rows(summary.counted.by_layer, summary.analytic.by_layer)
    [(r.label, r.counted, r.counted_total) for r in rows]
    # [('embedding', 38597376, 38597376), ('blocks.0-11 ×12', 7087872, 85054464), ...]

A row's ``counted`` and ``analytic`` are the counts of one layer (of one block, for a folded run); the
``*_total`` properties multiply by the run's length.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LayerRow", "block_index", "fold_layer_rows", "layer_of"]


def layer_of(path: str) -> str:
    """The row of a per-layer table a module path belongs to: ``decoder.blocks.3`` or the path itself."""
    parts = path.split(".")
    for i in range(len(parts) - 1):
        if parts[i] == "blocks" and parts[i + 1].isdigit():
            return ".".join(parts[: i + 2])
    return path


def block_index(row: str) -> tuple[str, int] | None:
    """``("decoder.blocks", 3)`` for the row of a whole block ``decoder.blocks.3``; None for any other row."""
    stack, _, index = row.rpartition(".")
    if not index.isdigit() or layer_of(row) != row or not (stack == "blocks" or stack.endswith(".blocks")):
        return None
    return stack, int(index)


@dataclass(frozen=True)
class LayerRow:
    """One row of the per-layer table: a layer, or ``repeat`` consecutive blocks with the same counts."""

    first: str
    last: str
    repeat: int
    counted: int
    """Parameters of one layer (one block of the run), as the built model holds them."""
    analytic: int
    """The same, from the formulas."""

    @property
    def label(self) -> str:
        """``blocks.0-11 ×12`` for a run of blocks, the layer's name otherwise."""
        if self.repeat == 1:
            return self.first
        return f"{self.first}-{self.last.rpartition('.')[2]} ×{self.repeat}"

    @property
    def counted_total(self) -> int:
        return self.repeat * self.counted

    @property
    def analytic_total(self) -> int:
        return self.repeat * self.analytic

    @property
    def agrees(self) -> bool:
        return self.counted == self.analytic


def fold_layer_rows(counted_by_layer: Mapping[str, int], analytic_by_layer: Mapping[str, int]) -> list[LayerRow]:
    """The rows of both per-layer counts (the formulas' order, then rows only counted), consecutive blocks
    of one stack with the same counted and analytic figures folded into one row (a missing row counts 0)."""
    names = list(analytic_by_layer) + [r for r in counted_by_layer if r not in analytic_by_layer]
    rows: list[LayerRow] = []
    for name in names:
        counted, analytic = counted_by_layer.get(name, 0), analytic_by_layer.get(name, 0)
        here, previous = block_index(name), block_index(rows[-1].last) if rows else None
        if (
            here is not None
            and previous is not None
            and here == (previous[0], previous[1] + 1)
            and (rows[-1].counted, rows[-1].analytic) == (counted, analytic)
        ):
            last = rows.pop()
            rows.append(LayerRow(last.first, name, last.repeat + 1, counted, analytic))
        else:
            rows.append(LayerRow(name, name, 1, counted, analytic))
    return rows
