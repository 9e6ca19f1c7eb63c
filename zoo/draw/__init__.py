"""``zoo draw``: a recipe's architecture as a block diagram, in the style of "Attention Is All You Need".

The figure shows what a meta-device build of the recipe holds (``model.zoo_components``, no memory, a few
milliseconds): the input embedding and positional encoding, each distinct kind of block with its norms,
attention (heads, KV heads, head_dim) and feed-forward (widths, experts and top-k), its residual
connections drawn as the block computes them (pre-norm, post-norm, sandwich, parallel), the ``× N``
repeat (kinds that alternate, as Gemma 3's five local layers to one global, framed once more as their
repeating unit: ``× 4 [A × 5, B], then A × 2``), the final norm and the head. Every box says what its
component's config says of itself (``zoo.label``): a layer's own rotary base, soft-caps, head widths.
An encoder-decoder shows both stacks side by side, the encoder
output feeding every cross-attention. Components of plugins show with their registered name and the
options their recipe sets.

Two steps: ``describe`` turns a built model into ``Stack`` facts (the text of every box), and ``layout``
places them on a ``Canvas``, one data unit to the inch, with text measured in the font it is drawn in, so
boxes fit their text and nothing overlaps. ``draw`` draws the canvas with matplotlib (the ``zoo[plot]``
extra, imported only there) into an SVG or a PNG.

    from zoo.draw import draw
    draw("gpt2-small", "gpt2.svg")

The package: ``describe`` (the facts), ``layout`` (the layout engine) and ``render`` (matplotlib); ``layout``
and ``draw`` here put them together.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zoo.errors import ArgumentError

from .describe import Kind, Label, Stack, Unit, describe
from .layout import _compose, _count
from .render import FORMATS, RC, Canvas, _format, _matplotlib

__all__ = ["FORMATS", "RC", "Canvas", "Kind", "Label", "Stack", "Unit", "describe", "draw", "layout"]


def layout(recipe: str | Path | Mapping[str, Any] | Any) -> Canvas:
    """The figure of ``recipe`` placed on a ``Canvas``, not yet drawn (call inside ``rc_context(RC)``)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    from zoo.builder import build
    from zoo.recipe import Recipe, load_recipe

    resolved = recipe if isinstance(recipe, Recipe) else load_recipe(recipe)
    model = build(resolved, device="meta")
    stacks, notes = describe(model)
    total = sum(p.numel() for p in model.parameters())

    renderer = RendererAgg(10, 10, 72)  # 72 dpi: one pixel to the point
    cache: dict[tuple[str, float, bool], float] = {}

    def measure(s: str, size: float, bold: bool) -> float:
        """The width of ``s`` in inches."""
        key = (s, size, bold)
        if key not in cache:
            font = FontProperties(size=size, weight="bold" if bold else "normal")
            cache[key] = renderer.get_text_width_height_descent(s, font, ismath=False)[0] / 72
        return cache[key]

    canvas = Canvas(measure)
    subtitle = [f"{resolved.architecture} · d_model {resolved.d_model} · {_count(total)} parameters"]
    subtitle += [resolved.description] if resolved.description else []
    _compose(canvas, stacks, notes, resolved.name, subtitle)
    return canvas


def draw(recipe: str | Path | Mapping[str, Any] | Any, out: str | Path, *, dpi: int = 150) -> Path:
    """Draw the architecture of ``recipe`` (a name, a file, a dict or a ``Recipe``) into ``out``, an SVG or a
    PNG by its suffix (``dpi`` sets the PNG's resolution); return ``out``. The file is replaced whole or
    not at all.

    Raises ``ArgumentError`` for another suffix or a ``dpi`` outside 10-1200, ``ZooError`` when matplotlib
    is missing, and the recipe's own errors.
    """
    out = Path(out)
    fmt = _format(out)
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 10 <= dpi <= 1200:
        raise ArgumentError(f"dpi must be an integer from 10 to 1200, not {dpi!r}")
    matplotlib = _matplotlib()
    from matplotlib.figure import Figure

    from zoo.files import atomic_write

    with matplotlib.rc_context(RC):
        canvas = layout(recipe)
        x0, y0, x1, y1 = canvas.bounds()
        pad = 0.25
        fig = Figure(figsize=(x1 - x0 + 2 * pad, y1 - y0 + 2 * pad))
        ax = fig.add_axes((0, 0, 1, 1))  # the whole figure, one data unit to the inch
        ax.set_xlim(x0 - pad, x1 + pad)
        ax.set_ylim(y0 - pad, y1 + pad)
        ax.set_axis_off()
        for op, _ in canvas.ops:
            op(ax, 0.0, 0.0)
        metadata = {"Date": None} if fmt == "svg" else None  # no date: the same recipe gives the same file
        atomic_write(out, lambda tmp: fig.savefig(tmp, format=fmt, dpi=dpi, facecolor="white", metadata=metadata))
    return out
