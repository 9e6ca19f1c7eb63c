"""Drawing with matplotlib: the ``Canvas`` of drawing operations placed in inches (text measured in the font it
is drawn in, boxes, lines, residual adds), its colours and type sizes, and the file formats ``draw`` writes.

matplotlib (the ``zoo[plot]`` extra) is imported only when something is drawn or measured."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zoo.errors import ArgumentError, ZooError

if TYPE_CHECKING:
    from .describe import Label

FORMATS = {".svg": "svg", ".png": "png"}
"""The file suffixes ``draw`` writes, and the matplotlib format of each."""


COLORS = {
    "embedding": "#f8cecc",
    "positional": "#ffffff",
    "attention": "#fcdcb4",
    "ffn": "#cce5f6",
    "norm": "#f3f0b8",
    "head": "#e1d5e7",
    "other": "#e6e6e6",
}
INK = "#333333"
FRAME = "#f4f4f4"
EXPERT_ON = "#3d85c6"

TITLE_PT, SUBTITLE_PT, BOX_TITLE_PT, BOX_PT, SIDE_PT, REPEAT_PT = 15, 9.5, 9.5, 8, 8.5, 16
PAD_X, PAD_Y = 0.14, 0.07  # text to box edge, inches
PLUS_R = 0.1  # radius of a residual add (⊕)
EXPERT, EXPERT_GAP, MAX_EXPERTS_SHOWN = 0.13, 0.045, 16


def _line_height(points: float) -> float:
    return points / 72 * 1.35


Rect = tuple[float, float, float, float]
"""(x0, y0, x1, y1) in inches; for a segment, its two ends."""


class Canvas:
    """Drawing operations placed in inches (one data unit), with their extents, drawn later on an Axes.

    ``shapes`` keeps what a reader must tell apart, for checking that nothing collides: ``("text", extent,
    text)``, ``("box", extent, title)`` and ``("segment", ends, "")`` for every straight piece of a line.
    """

    def __init__(self, measure: Callable[[str, float, bool], float]) -> None:
        self.measure = measure
        self.ops: list[tuple[Callable[[Any, float, float], None], Rect]] = []
        self.shapes: list[tuple[str, Rect, str]] = []

    # extents
    def add(self, op: Callable[[Any, float, float], None], box: Rect) -> None:
        self.ops.append((op, box))

    def bounds(self) -> tuple[float, float, float, float]:
        boxes = [b for _, b in self.ops]
        return (
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        )

    def paste(self, other: Canvas, dx: float, dy: float = 0.0) -> None:
        """Everything on ``other``, moved by (dx, dy)."""
        for op, (x0, y0, x1, y1) in other.ops:
            self.add(lambda ax, ox, oy, op=op: op(ax, ox + dx, oy + dy), (x0 + dx, y0 + dy, x1 + dx, y1 + dy))
        for tag, (x0, y0, x1, y1), what in other.shapes:
            self.shapes.append((tag, (x0 + dx, y0 + dy, x1 + dx, y1 + dy), what))

    # primitives
    def text(
        self, x: float, y: float, s: str, size: float, *, bold: bool = False, ha: str = "center", color: str = INK
    ) -> None:
        """``s`` with its vertical centre at ``y``, aligned on ``x`` by ``ha``."""
        w, h = self.measure(s, size, bold), _line_height(size)
        x0 = {"center": x - w / 2, "left": x, "right": x - w}[ha]

        def op(ax: Any, dx: float, dy: float) -> None:
            ax.text(
                x + dx, y + dy, s, fontsize=size, fontweight="bold" if bold else "normal", ha=ha, va="center",
                color=color, zorder=4, parse_math=False,
            )  # fmt: skip

        self.add(op, (x0, y - h / 2, x0 + w, y + h / 2))
        self.shapes.append(("text", (x0, y - h / 2, x0 + w, y + h / 2), s))

    def line(self, points: list[tuple[float, float]], *, arrow: bool = True, width: float = 1.0) -> None:
        """A polyline, with an arrowhead at its end when ``arrow``."""

        def op(ax: Any, dx: float, dy: float) -> None:
            from matplotlib.lines import Line2D
            from matplotlib.patches import FancyArrowPatch

            pts = [(x + dx, y + dy) for x, y in points]
            body = pts[:-1] if arrow else pts
            if len(body) > 1:
                xs, ys = zip(*body, strict=True)
                ax.add_line(Line2D(xs, ys, color=INK, lw=width, zorder=1, solid_joinstyle="miter"))
            if arrow:
                ax.add_patch(
                    FancyArrowPatch(
                        pts[-2], pts[-1], arrowstyle="-|>", mutation_scale=10, color=INK, lw=width,
                        shrinkA=0, shrinkB=0, zorder=1.5,
                    )
                )  # fmt: skip

        xs, ys = [p[0] for p in points], [p[1] for p in points]
        self.add(op, (min(xs), min(ys), max(xs), max(ys)))
        self.shapes += [("segment", (*a, *b), "") for a, b in zip(points, points[1:], strict=False)]

    def plus(self, x: float, y: float) -> None:
        """A residual add: a circle with a plus."""

        def op(ax: Any, dx: float, dy: float) -> None:
            from matplotlib.lines import Line2D
            from matplotlib.patches import Circle

            cx, cy, r = x + dx, y + dy, PLUS_R
            ax.add_patch(Circle((cx, cy), r, fc="white", ec=INK, lw=1, zorder=2))
            ax.add_line(Line2D([cx - 0.6 * r, cx + 0.6 * r], [cy, cy], color=INK, lw=1, zorder=3))
            ax.add_line(Line2D([cx, cx], [cy - 0.6 * r, cy + 0.6 * r], color=INK, lw=1, zorder=3))

        self.add(op, (x - PLUS_R, y - PLUS_R, x + PLUS_R, y + PLUS_R))

    def dot(self, x: float, y: float) -> None:
        def op(ax: Any, dx: float, dy: float) -> None:
            from matplotlib.patches import Circle

            ax.add_patch(Circle((x + dx, y + dy), 0.028, fc=INK, ec=INK, lw=0, zorder=2))

        self.add(op, (x, y, x, y))

    def rect(self, x0: float, y0: float, w: float, h: float, *, fill: str, edge: str, z: float, r: float) -> None:
        def op(ax: Any, dx: float, dy: float) -> None:
            from matplotlib.patches import FancyBboxPatch

            style = f"round,pad=0,rounding_size={r}"
            ax.add_patch(FancyBboxPatch((x0 + dx, y0 + dy), w, h, boxstyle=style, fc=fill, ec=edge, lw=0.9, zorder=z))

        self.add(op, (x0, y0, x0 + w, y0 + h))

    # parts
    def label_width(self, label: Label) -> float:
        widths = [self.measure(label.title, BOX_TITLE_PT, True), *(self.measure(s, BOX_PT, False) for s in label.lines)]
        if label.experts:
            shown = min(label.experts[0], MAX_EXPERTS_SHOWN)
            widths.append(shown * (EXPERT + EXPERT_GAP) + 0.4)
        return max(widths) + 2 * PAD_X

    @staticmethod
    def label_height(label: Label) -> float:
        h = 2 * PAD_Y + _line_height(BOX_TITLE_PT) + len(label.lines) * _line_height(BOX_PT)
        return h + (EXPERT + 0.08 if label.experts else 0)

    def box(self, label: Label, x: float, y: float, w: float) -> float:
        """``label`` in a box of width ``w`` centred on ``x`` with its bottom at ``y``; returns its top."""
        h = self.label_height(label)
        self.rect(x - w / 2, y, w, h, fill=COLORS.get(label.kind, COLORS["other"]), edge=INK, z=2, r=0.06)
        self.shapes.append(("box", (x - w / 2, y, x + w / 2, y + h), label.title))
        top = y + h - PAD_Y
        self.text(x, top - _line_height(BOX_TITLE_PT) / 2, label.title, BOX_TITLE_PT, bold=True)
        for i, s in enumerate(label.lines):
            self.text(x, top - _line_height(BOX_TITLE_PT) - (i + 0.5) * _line_height(BOX_PT), s, BOX_PT)
        if label.experts:
            n, k = label.experts
            shown = min(n, MAX_EXPERTS_SHOWN)
            more = f"+{n - shown}" if n > shown else ""
            row = shown * EXPERT + (shown - 1) * EXPERT_GAP
            left, bottom = x - row / 2 - (0.15 if more else 0), y + PAD_Y
            for i in range(shown):
                fill = EXPERT_ON if i < k else "white"
                self.rect(left + i * (EXPERT + EXPERT_GAP), bottom, EXPERT, EXPERT, fill=fill, edge=INK, z=3, r=0.02)
            if more:
                self.text(left + row + 0.06, bottom + EXPERT / 2, more, BOX_PT - 1, ha="left")
        return y + h

    def side_text(self, x: float, y: float, lines: list[tuple[str, float, bool]], ha: str) -> None:
        """Lines of (text, size, bold) stacked with their middle at ``y``."""
        heights = [_line_height(size) for _, size, _ in lines]
        top = y + sum(heights) / 2
        for (s, size, bold), h in zip(lines, heights, strict=True):
            self.text(x, top - h / 2, s, size, bold=bold, ha=ha)
            top -= h


def _matplotlib() -> Any:
    """The matplotlib module, or a ZooError saying how to install it."""
    try:
        import matplotlib
        from matplotlib.figure import Figure  # noqa: F401 - fails here, not halfway through the drawing
    except ImportError:
        raise ZooError("zoo draw needs matplotlib: pip install 'zoo[plot]'") from None
    return matplotlib


def _format(out: Path) -> str:
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None:
        what = f"a {out.suffix!r} file" if out.suffix else "a file without a suffix"
        raise ArgumentError(f"{out}: cannot draw to {what}; the accepted suffixes are .svg and .png")
    return fmt


RC = {"svg.fonttype": "none", "font.family": "DejaVu Sans", "svg.hashsalt": "zoo", "text.usetex": False}
"""Text stays text in an SVG (searchable, small), in the font it was measured in; ids are reproducible."""
