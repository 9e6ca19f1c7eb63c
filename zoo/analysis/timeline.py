"""A traced step composed for the whole model: every block of a stack is its kind's traced segment, forward
in order and backward in reverse (``compose``), and what each unit keeps for backward (``UnitShare``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .stepmodel import BLOCK

if TYPE_CHECKING:
    from .steptrace import StepTrace


@dataclass(frozen=True)
class UnitShare:
    """What one unit of the model keeps for backward in the forward pass, at the traced micro-batch."""

    name: str
    """``embedding``, ``blocks.0-31`` (a run of blocks of one kind), ``head and loss``..."""
    count: int
    """How many units this row stands for (blocks of one kind)."""
    saved_each: int
    """Bytes each one keeps after its forward (what the backward reads), casts of weights included."""
    casts_each: int
    """Of which low-precision copies of its weights (autocast)."""
    params_each: int
    """Weight bytes of each one (FSDP gathers them whole while it runs)."""


@dataclass
class Timeline:
    """The whole model's step, one entry per operator: live bytes beside the weights and optimizer state."""

    gradients: np.ndarray
    activations: np.ndarray
    casts: np.ndarray
    temporaries: np.ndarray
    segment: np.ndarray
    """Index into ``segments`` of each operator."""
    segments: list[tuple[str | None, str, int]]
    """(unit of the full model, phase, weight bytes gathered while it runs under FSDP: the block's)."""
    grad_start: np.ndarray
    """Gradient bytes when each operator's segment began (FSDP has sharded those by then)."""
    segment_gradients: list[int]
    """Gradient bytes when each segment began, and at the end of the step (one more entry)."""

    @property
    def total(self) -> np.ndarray:
        """Live bytes beside the weights and the optimizer state, after every operator."""
        return self.gradients + self.activations + self.casts + self.temporaries


@dataclass
class _Piece:
    unit: str | None
    phase: str
    start: tuple[int, int, int, int]
    end: tuple[int, int, int, int]
    values: list[np.ndarray]  # gradients, activations, casts, temporaries after each operator


def _pieces(trace: StepTrace) -> list[_Piece]:
    """The recorded segments with their end values, gaps between two blocks of a stack merged into the first."""
    segs = trace.segments
    pieces: list[_Piece] = []
    for i, s in enumerate(segs):
        values = [np.asarray(v, dtype=np.int64) for v in (s.gradients, s.activations, s.casts, s.temporaries)]
        pieces.append(_Piece(s.unit, s.phase, s.start, segs[i + 1].start if i + 1 < len(segs) else trace.end, values))
    merged: list[_Piece] = []
    for i, p in enumerate(pieces):
        prev = merged[-1] if merged else None
        nxt = next((q for q in pieces[i + 1 :] if q.unit is not None), None)
        if (
            prev is not None
            and prev.phase == p.phase
            and (p.unit is None or p.unit == prev.unit)
            and _stack_of(prev.unit) is not None
            and (p.unit == prev.unit or (nxt is not None and _stack_of(nxt.unit) == _stack_of(prev.unit)))
        ):
            prev.values = [np.concatenate([a, b]) for a, b in zip(prev.values, p.values, strict=True)]
            prev.end = p.end
            continue
        merged.append(p)
    return merged


def _stack_of(unit: str | None) -> str | None:
    if unit is None:
        return None
    m = BLOCK.match(unit)
    return m.group("stack") if m else None


def compose(trace: StepTrace) -> Timeline:
    """The whole model's timeline from the reduced model's trace (see the module docstring)."""
    pieces = _pieces(trace)
    layout: list[_Piece | tuple[str, str]] = []  # a piece, or (stack, phase): the place of that stack's run
    runs: dict[tuple[str, str], dict[str, _Piece]] = {}
    for p in pieces:
        stack = _stack_of(p.unit)
        if stack is None:
            layout.append(p)
            continue
        key = (stack, p.phase)
        if key not in runs:
            runs[key] = {}
            layout.append(key)
        runs[key][p.unit] = p
    order: list[tuple[str | None, _Piece]] = []
    for item in layout:
        if isinstance(item, _Piece):
            order.append((item.unit, item))
            continue
        stack, phase = item
        kinds = trace.full_blocks[stack]
        names = [f"{stack}blocks.{i}" for i in range(len(kinds))]
        sequence = list(zip(names, kinds, strict=True))
        if phase == "backward":
            sequence.reverse()
        for name, kind in sequence:
            piece = runs[item].get(kind)
            if piece is not None:
                order.append((name, piece))
    columns: list[list[np.ndarray]] = [[], [], [], []]
    seg_index, grad_start = [], []
    segments: list[tuple[str | None, str, int]] = []
    offset = [0, 0, 0, 0]
    seg_grads = [0]
    for k, (name, piece) in enumerate(order):
        reused = _reused(trace, name, piece.phase)
        for c in range(4):
            grows = c != reused
            columns[c].append(offset[c] + (piece.values[c] - piece.start[c]) * grows)
        n = len(piece.values[0])
        seg_index.append(np.full(n, k, dtype=np.int64))
        grad_start.append(np.full(n, offset[0], dtype=np.int64))
        segments.append((name, piece.phase, trace.block_params.get(name or "", 0)))
        offset = [offset[c] + (piece.end[c] - piece.start[c]) * (c != reused) for c in range(4)]
        seg_grads.append(offset[0])

    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    return Timeline(
        gradients=cat(columns[0]),
        activations=cat(columns[1]),
        casts=cat(columns[2]),
        temporaries=cat(columns[3]),
        segment=cat(seg_index),
        segments=segments,
        grad_start=cat(grad_start),
        segment_gradients=seg_grads,
    )


GRADIENTS, CASTS = 0, 2
"""Columns of a piece's values: gradients, activations, casts, temporaries."""


def _reused(trace: StepTrace, name: str | None, phase: str) -> int | None:
    """The column that does not grow in this block's piece because another layer of its group (``layer_groups``)
    holds it: the forward's low-precision copies of the weights are made by the group's first layer (autocast
    keeps them for the step), the backward's gradients by the first layer the backward reaches (its last)."""
    groups = getattr(trace.recipe, "layer_groups", None)
    m = BLOCK.match(name or "")
    if groups is None or m is None:
        return None
    n, i = len(trace.full_blocks[m.group("stack")]), int(m.group("index"))
    size = max(n // groups, 1)
    first = i // size * size
    if phase == "forward":
        return CASTS if i != first else None
    return GRADIENTS if i != min(first + size, n) - 1 else None


def _unit_shares(trace: StepTrace) -> list[UnitShare]:
    """What each unit keeps after its forward: blocks folded by kind, the loss with the head."""
    rows: dict[str, list[int]] = {}
    order: list[str] = []
    seen_head = False
    for p in _pieces(trace):
        if p.phase != "forward":
            continue
        saved = p.end[1] - p.start[1] + p.end[2] - p.start[2]
        casts = p.end[2] - p.start[2]
        name = p.unit
        if name == "head":
            seen_head = True
        if name is None:
            if not seen_head:
                continue  # inputs and the moments between units before the head: the next unit's input
            name = "head"
        if name not in rows:
            rows[name] = [0, 0]
            order.append(name)
        rows[name][0] += saved
        rows[name][1] += casts
    out: list[UnitShare] = []
    block_rows: dict[str, tuple[int, int]] = {}
    for name in order:
        if BLOCK.match(name):
            block_rows[name] = (rows[name][0], rows[name][1])
            continue
        label = "head and loss" if name == "head" else name
        out.append(UnitShare(label, 1, rows[name][0], rows[name][1], 0))
    for stack, kinds in trace.full_blocks.items():
        runs: list[tuple[str, int, int]] = []  # kind, first index, count
        for i, kind in enumerate(kinds):
            if runs and runs[-1][0] == kind and runs[-1][1] + runs[-1][2] == i:
                runs[-1] = (kind, runs[-1][1], runs[-1][2] + 1)
            else:
                runs.append((kind, i, 1))
        for kind, first, count in runs:
            saved, casts = block_rows.get(kind, (0, 0))
            label = f"{stack}blocks.{first}" + (f"-{first + count - 1}" if count > 1 else "")
            params = trace.block_params.get(f"{stack}blocks.{first}", 0)
            out.append(UnitShare(label, count, saved, casts, params))
    head = [u for u in out if u.name == "head and loss"]
    rest = [u for u in out if u.name != "head and loss"]
    return rest + head
