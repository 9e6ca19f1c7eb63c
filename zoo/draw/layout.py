"""The layout engine: the stacks of ``describe`` placed on a ``Canvas`` left to right, each block with its
residual connections as the block computes them (pre-norm, post-norm, sandwich, parallel), the ``× N`` repeat
beside its frame, the encoder output routed into every cross-attention, and the title and notes on top."""

from __future__ import annotations

from dataclasses import dataclass, field

from .describe import Kind, Label, Stack, Unit
from .render import (
    BOX_PT,
    FRAME,
    PLUS_R,
    REPEAT_PT,
    SIDE_PT,
    SUBTITLE_PT,
    TITLE_PT,
    Canvas,
    _line_height,
)

GAP = 0.26  # vertical space between consecutive parts (an arrow)
SKIP = 0.17  # box edge to residual line
MARGIN = 0.34  # box edge to block frame
OUTER = 0.16  # block frame to the frame of a repeating unit of blocks
COL_GAP = 0.22  # between the columns of a parallel block
STACK_GAP = 0.9  # between stacks (the encoder output runs here)
MIN_WIDTH = 2.5


@dataclass
class _Column:
    """Where a stack ended up: its output (top of the main line) and the cross-attention boxes it feeds."""

    top: tuple[float, float]
    cross: list[tuple[float, float]] = field(default_factory=list)
    """(edge x, centre y) of each cross-attention box, on the side the encoder output comes from."""
    head: tuple[float, float] | None = None
    """(left edge x, centre y) of the head box: where another tower's output joins it (a dual-encoder)."""


def _stack_width(canvas: Canvas, stack: Stack) -> float:
    """The width of the stack's boxes: its widest label, or a parallel block's columns side by side."""
    labels = [stack.embedding, stack.embed_norm, stack.final_norm, stack.head]
    width = max([canvas.label_width(label) for label in labels if label is not None] + [MIN_WIDTH])
    for kind in stack.kinds:
        if kind.layout == "parallel":
            columns = _column_widths(canvas, kind.units)
            width = max(width, sum(columns) + (len(columns) - 1) * COL_GAP)
            if kind.shared_norm is not None:
                width = max(width, canvas.label_width(kind.shared_norm))
        else:
            parts = [p for u in kind.units for p in (u.sublayer, u.norm, u.post_norm) if p is not None]
            width = max(width, *(canvas.label_width(p) for p in parts))
    return width


def _column_widths(canvas: Canvas, units: list[Unit]) -> list[float]:
    """The width each sub-layer of a parallel block needs for its boxes."""
    return [max(canvas.label_width(p) for p in (u.norm, u.sublayer) if p is not None) for u in units]


def _layers_text(layers: list[int]) -> str:
    if len(layers) == 1:
        return f"layer {layers[0]}"
    steps = {b - a for a, b in zip(layers, layers[1:], strict=False)}
    if steps == {1}:
        return f"layers {layers[0]}–{layers[-1]}"
    if len(steps) == 1 and len(layers) > 3:
        return f"layers {layers[0]}, {layers[1]}, …, {layers[-1]}"
    shown = ", ".join(str(i) for i in layers[:6])
    return f"layers {shown}" + (", …" if len(layers) > 6 else "")


LAYOUT_WORDS = {
    "pre": "pre-norm",
    "post": "post-norm",
    "sandwich": "sandwich norm",
    "output": "norm on each output",
    "parallel": "parallel attention + FFN",
    "chain": "components in order",
}


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _draw_stack(canvas: Canvas, stack: Stack, width: float, *, skip_side: int, label_side: int) -> _Column:
    """Lay out ``stack`` centred on x = 0 from y = 0 upwards. ``skip_side`` (-1 left, +1 right) is where
    residual lines run, ``label_side`` where the ``× N`` and the positional labels go."""
    x, w = 0.0, width
    skip_x = skip_side * (w / 2 + SKIP)
    frame_x = w / 2 + MARGIN
    column = _Column(top=(0, 0))

    y = 0.0
    if stack.input:  # a later stage of a sequence has none: the previous stage's output comes in
        canvas.text(x, 0.1, stack.input, SIDE_PT)
        y = 0.1 + _line_height(SIDE_PT) / 2

    def arrow_to(top: float, bottom: float, *, arrow: bool = True) -> None:
        canvas.line([(x, top), (x, bottom)], arrow=arrow)

    if stack.embedding is not None:
        arrow_to(y, y + GAP)
        y = canvas.box(stack.embedding, x, y + GAP, w)
    if stack.positional is not None:
        arrow_to(y, y + GAP)
        cy = y + GAP + PLUS_R
        canvas.plus(x, cy)
        start = label_side * (PLUS_R + 0.45)
        canvas.line([(start, cy), (label_side * PLUS_R, cy)])
        lines = [(stack.positional.title, SIDE_PT, True)] + [(s, SIDE_PT - 0.5, False) for s in stack.positional.lines]
        canvas.side_text(start + label_side * 0.08, cy, lines, "left" if label_side > 0 else "right")
        y = cy + PLUS_R
    if stack.embed_norm is not None:
        arrow_to(y, y + GAP)
        y = canvas.box(stack.embed_norm, x, y + GAP, w)

    outer_x = frame_x + OUTER
    if stack.pattern is not None:  # the repeating unit, framed once more
        outer_bottom = y + GAP * 0.6
        arrow_to(y, outer_bottom, arrow=False)
        y = outer_bottom + 0.02
    for kind in stack.kinds:
        frame_bottom = y + GAP * 0.6
        arrow_to(y, frame_bottom, arrow=False)
        y = frame_bottom + 0.02
        arrow_to(frame_bottom, y, arrow=False)
        if kind.layout == "parallel":
            y = _parallel(canvas, kind, x, y, w, skip_x, column, skip_side)
        else:
            y = _sequential(canvas, kind, x, y, w, skip_x, column, skip_side)
        frame_top = y + 0.16
        canvas.rect(
            -frame_x, frame_bottom, 2 * frame_x, frame_top - frame_bottom, fill=FRAME, edge="#9a9a9a", z=0, r=0.12
        )
        arrow_to(y, frame_top, arrow=False)
        side = _side_label(stack, kind)
        canvas.side_text(
            label_side * (frame_x + 0.16), (frame_bottom + frame_top) / 2, side, "left" if label_side > 0 else "right"
        )
        y = frame_top
    if stack.pattern is not None:
        band = _line_height(REPEAT_PT)
        outer_top = y + 0.12 + band
        arrow_to(y, outer_top, arrow=False)
        height = outer_top - outer_bottom
        canvas.rect(-outer_x, outer_bottom, 2 * outer_x, height, fill="#fbfbfb", edge="#9a9a9a", z=-1, r=0.16)
        side = [(stack.pattern.text, REPEAT_PT - 4, True)]
        ha = "left" if label_side > 0 else "right"
        canvas.side_text(label_side * (outer_x + 0.16), outer_top - band / 2, side, ha)
        y = outer_top

    for label in (*stack.after, stack.final_norm, stack.head):
        if label is not None:
            arrow_to(y, y + GAP)
            bottom, y = y + GAP, canvas.box(label, x, y + GAP, w)
            if label is stack.head:
                column.head = (x - w / 2, (bottom + y) / 2)
    if stack.output is not None:
        arrow_to(y, y + GAP)
        canvas.text(x, y + GAP + _line_height(SIDE_PT) / 2, stack.output, SIDE_PT, bold=True)
        y += GAP + _line_height(SIDE_PT)
    column.top = (x, y)
    return column


def _side_label(stack: Stack, kind: Kind) -> list[tuple[str, float, bool]]:
    """What stands beside a block's frame: ``× N``, which blocks, their layout and size."""
    if not stack.num_layers:  # not blocks at all: the components of an architecture zoo does not know
        return [(LAYOUT_WORDS["chain"], SIDE_PT, False)]
    what = f"{stack.name or ('decoder' if stack.causal else 'encoder')} block"
    if stack.pattern is not None:  # how many in each repeat of the unit, then how many in all
        side = [(f"× {stack.pattern.count(kind.name)}", REPEAT_PT, True)]
        side.append((f"{what} {kind.name}, {len(kind.layers)} in all", SIDE_PT, False))
    else:
        side = [(f"× {len(kind.layers)}", REPEAT_PT, True)]
        side.append((f"{what} {kind.name}" if kind.name else f"{what}s", SIDE_PT, False))
    side.append((LAYOUT_WORDS.get(kind.layout, kind.layout), SIDE_PT, False))
    if len(stack.kinds) > 1:
        side.append((_layers_text(kind.layers), SIDE_PT, False))
    if kind.weight_sets and kind.weight_sets < len(kind.layers):  # layer_groups: layers share their weights
        sets = "one set of weights" if kind.weight_sets == 1 else f"{kind.weight_sets} sets of weights, each"
        side.append((f"shared: {sets} of {_count(kind.params)} params", SIDE_PT, False))
    else:
        side.append((f"{_count(kind.params)} params each", SIDE_PT, False))
    return side


def _residual_unit(
    canvas: Canvas, unit: Unit, x: float, y: float, w: float, skip_x: float, layout: str, column: _Column, side: int
) -> float:
    """One sub-layer with its norms and residual add, from ``y`` up; returns the top of its last part."""
    branch = y + 0.16
    canvas.dot(x, branch)
    y = branch
    if layout == "post":
        parts: list[Label | str] = [unit.sublayer, "+", unit.norm] if unit.norm else [unit.sublayer, "+"]
    else:
        parts = [p for p in (unit.norm, unit.sublayer, unit.post_norm) if p is not None] + ["+"]
    for part in parts:
        bottom = y + GAP
        canvas.line([(x, y), (x, bottom)])
        if part == "+":
            canvas.plus(x, bottom + PLUS_R)
            plus_y = bottom + PLUS_R
            toward = PLUS_R if skip_x > x else -PLUS_R
            canvas.line([(x, branch), (skip_x, branch), (skip_x, plus_y), (x + toward, plus_y)])
            y = bottom + 2 * PLUS_R
        else:
            top = canvas.box(part, x, bottom, w)
            if part is unit.sublayer and unit.cross:
                column.cross.append((x - side * w / 2, (bottom + top) / 2))
            y = top
    return y


def _sequential(
    canvas: Canvas, kind: Kind, x: float, y: float, w: float, skip_x: float, column: _Column, side: int
) -> float:
    if kind.layout == "chain":
        for i, unit in enumerate(kind.units):
            if i:
                canvas.line([(x, y), (x, y + GAP)])
                y += GAP
            y = canvas.box(unit.sublayer, x, y, w)
        return y
    for unit in kind.units:
        y = _residual_unit(canvas, unit, x, y, w, skip_x, kind.layout, column, side)
    return y


def _parallel(
    canvas: Canvas, kind: Kind, x: float, y: float, w: float, skip_x: float, column: _Column, side: int
) -> float:
    """Every sub-layer reads the block input (through its norm, or the shared one); their outputs and the
    input are added once. Columns side by side, the cross-attention nearest the encoder."""
    branch = y + 0.16
    canvas.dot(x, branch)
    y = branch
    if kind.shared_norm is not None:
        canvas.line([(x, y), (x, y + GAP)])
        y = canvas.box(kind.shared_norm, x, y + GAP, w)
    units = sorted(kind.units, key=lambda u: not u.cross) if side > 0 else sorted(kind.units, key=lambda u: u.cross)
    widths = _column_widths(canvas, units)
    spare = (w - sum(widths) - (len(units) - 1) * COL_GAP) / len(units)  # shared out: the columns fill w
    widths = [cw + spare for cw in widths]
    xs, left = [], x - w / 2
    for cw in widths:
        xs.append(left + cw / 2)
        left += cw + COL_GAP
    split = y + GAP * 0.6
    canvas.line([(x, y), (x, split)], arrow=False)
    canvas.line([(xs[0], split), (xs[-1], split)], arrow=False)
    tops = []
    for cx, cw, unit in zip(xs, widths, units, strict=True):
        cy = split
        for part in (unit.norm, unit.sublayer):
            if part is None:
                continue
            canvas.line([(cx, cy), (cx, cy + GAP)])
            top = canvas.box(part, cx, cy + GAP, cw)
            if part is unit.sublayer and unit.cross:
                column.cross.append((cx - side * cw / 2, (cy + GAP + top) / 2))
            cy = top
        tops.append((cx, cy))
    join = max(t for _, t in tops) + GAP * 0.6
    for cx, top in tops:
        canvas.line([(cx, top), (cx, join)], arrow=False)
    canvas.line([(xs[0], join), (xs[-1], join)], arrow=False)
    plus_y = join + GAP + PLUS_R
    canvas.line([(x, join), (x, plus_y - PLUS_R)])
    canvas.plus(x, plus_y)
    toward = PLUS_R if skip_x > x else -PLUS_R
    canvas.line([(x, branch), (skip_x, branch), (skip_x, plus_y), (x + toward, plus_y)])
    return plus_y + PLUS_R


def _fit(canvas: Canvas, text: str, width: float, size: float) -> list[str]:
    """``text`` broken into lines no wider than ``width`` inches, and as even as that many lines allow."""

    def greedy(limit: float) -> list[str]:
        lines: list[str] = []
        for word in text.split():
            if lines and canvas.measure(f"{lines[-1]} {word}", size, False) <= limit:
                lines[-1] += f" {word}"
            else:
                lines.append(word)
        return lines

    lines = greedy(width)
    limit = canvas.measure(text, size, False) / max(len(lines), 1)
    while limit < width:
        even = greedy(limit)
        if len(even) <= len(lines):
            return even
        limit += 0.1
    return lines


def _compose(canvas: Canvas, stacks: list[Stack], notes: list[str], title: str, subtitle: list[str]) -> None:
    """Place the stacks (one above the other for stages in sequence, else left to right), and the title, subtitle
    and notes on top."""
    width = max(_stack_width(canvas, s) for s in stacks)
    if len(stacks) > 1 and all(not s.input for s in stacks[1:]):  # stages in sequence (Swin)
        _in_sequence(canvas, stacks, width)
    else:
        _side_by_side(canvas, stacks, width)
    x0, _, x1, y1 = canvas.bounds()
    mid, width = (x0 + x1) / 2, max(x1 - x0, 7.0)
    header = [(line, SUBTITLE_PT) for s in subtitle for line in _fit(canvas, s, width, SUBTITLE_PT)]
    header += [(line, BOX_PT) for s in notes for line in _fit(canvas, s, width, BOX_PT)]
    y = y1 + 0.3
    for s, size in reversed(header):
        canvas.text(mid, y + _line_height(size) / 2, s, size)
        y += _line_height(size)
    canvas.text(mid, y + _line_height(TITLE_PT) / 2, title, TITLE_PT, bold=True)


def _in_sequence(canvas: Canvas, stacks: list[Stack], width: float) -> None:
    """Stages that run one after another, in one column from the bottom up, each joined to the next."""
    top = 0.0
    for stack in stacks:
        sub = Canvas(canvas.measure)
        column = _draw_stack(sub, stack, width, skip_side=-1, label_side=1)
        if top:
            canvas.line([(0.0, top), (0.0, top + GAP)])
            top += GAP
        canvas.paste(sub, 0.0, top)
        top += column.top[1]


def _side_by_side(canvas: Canvas, stacks: list[Stack], width: float) -> None:
    """Stacks left to right: the encoder output into each cross-attention, a tower's output into the last's head."""
    columns: list[tuple[_Column, float]] = []
    right = 0.0
    for i, stack in enumerate(stacks):
        last = i == len(stacks) - 1 and len(stacks) > 1
        sub = Canvas(canvas.measure)
        side = 1 if last else -1
        label_side = side if len(stacks) > 1 else 1
        column = _draw_stack(sub, stack, width, skip_side=side, label_side=label_side)
        x0, _, x1, _ = sub.bounds()
        dx = right - x0 + (STACK_GAP if columns else 0)
        canvas.paste(sub, dx)
        columns.append((column, dx))
        right = x1 + dx
    source, sdx = columns[0]
    for column, dx in columns[1:]:
        if not column.cross:
            continue
        sx, sy = source.top[0] + sdx, source.top[1]
        route = sy + 0.3
        gap_x = (sdx + width / 2 + MARGIN + dx - width / 2 - MARGIN) / 2
        canvas.line([(sx, sy), (sx, route), (gap_x, route)], arrow=False)
        canvas.text((sx + gap_x) / 2, route + _line_height(BOX_PT) * 0.7, "encoder output", BOX_PT)
        for ex, ey in column.cross:
            canvas.line([(gap_x, route), (gap_x, ey), (ex + dx, ey)])
    towers = len(columns) > 1 and not any(c.cross for c, _ in columns) and columns[-1][0].head is not None
    if towers:  # a dual-encoder: the first tower's output joins the last one's head
        (sx, sy), (hx, hy) = source.top, columns[-1][0].head
        dx = columns[-1][1]
        canvas.line([(sx + sdx, sy), (sx + sdx, hy), (hx + dx, hy)])
        canvas.text((sx + sdx + hx + dx) / 2, hy + _line_height(BOX_PT) * 0.7, "text vectors", BOX_PT)
