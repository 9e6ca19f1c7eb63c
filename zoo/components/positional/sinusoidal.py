"""``sinusoidal``: the fixed sin/cos table of Vaswani et al. (or fairseq's or Marian's layout) added to the input."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.config import BuildContext
from zoo.cost import Cost
from zoo.limits import MAX_POSITIONS

from .base import PositionalConfig, PositionalEncoding, sinusoid_table


def fairseq_sinusoid_table(rows: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """fairseq's table (M2M-100, as transformers computes it, in float32): row ``p`` holds ``sin(p * s_i)`` for
    every ``i`` in ``[0, E/2)``, then ``cos(p * s_i)``, at speeds ``s_i = base^(-i / (E/2 - 1))``. (rows, E)."""
    half = d_model // 2
    speeds = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(base) / (half - 1)))  # (E/2,)
    angles = torch.arange(rows, dtype=torch.int64).float().unsqueeze(1) * speeds.unsqueeze(0)  # (rows, E/2)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)  # (rows, E): sines, then cosines


def marian_sinusoid_table(rows: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Marian's and Pegasus's table (as transformers computes it, in float64): row ``p`` holds ``sin(p * s_i)``
    for every ``i`` in ``[0, E/2)``, then ``cos(p * s_i)``, at Vaswani's speeds ``s_i = base^(-2i/E)``. (rows, E)."""
    steps = base ** (torch.arange(d_model // 2, dtype=torch.float64) * 2 / d_model)  # (E/2,)
    angles = torch.arange(rows, dtype=torch.float64).unsqueeze(1) / steps  # (rows, E/2)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)  # (rows, E): sines, then cosines


TABLES = {"interleaved": sinusoid_table, "fairseq": fairseq_sinusoid_table, "marian": marian_sinusoid_table}
"""Each layout's table: (rows, d_model, base) -> (rows, d_model)."""


class SinusoidalEncoding(PositionalEncoding):
    """Fixed sinusoids of Vaswani et al. added to the input.

    ``PE[p, 2i] = sin(p / base^(2i/E))`` and ``PE[p, 2i+1] = cos(p / base^(2i/E))``: sin and cos interleaved.
    ``layout="fairseq"`` is fairseq's table instead (M2M-100): all sines, then all cosines, at speeds
    ``base^(-i / (E/2 - 1))`` (see :func:`fairseq_sinusoid_table`); ``layout="marian"`` is Marian's and
    Pegasus's: all sines, then all cosines, at Vaswani's speeds ``base^(-2i/E)`` (:func:`marian_sinusoid_table`).

    The table holds ``max_len + offset`` rows and position ``p`` reads row ``p + offset``; it is a
    non-persistent buffer (no parameters, not in the state dict) because it is a pure function of its options;
    with ``parameter`` it is a frozen parameter instead (counted, saved, never trained), as transformers holds
    Marian's and Pegasus's tables.
    With ``padding_idx`` positions are numbered from the token ids as fairseq numbers them: the k-th token that
    is not ``padding_idx`` is at position k - 1 and every padding token reads row ``offset - 1``, which is zero
    (M2M-100: offset 2 = padding_idx + 1). The model's token embedding does any ``sqrt(d_model)`` scaling; this
    module only adds.
    """

    def __init__(
        self,
        d_model: int,
        *,
        base: float = 10000.0,
        max_len: int,
        offset: int = 0,
        padding_idx: int | None = None,
        layout: Literal["interleaved", "fairseq", "marian"] = "interleaved",
        parameter: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if d_model % 2:
            raise ValueError(f"sinusoidal encoding needs an even d_model, got {d_model}")
        if padding_idx is not None and offset < 1:
            raise ValueError("padding-aware positions read row offset - 1 for padding: offset must be >= 1")
        self.base = base
        self.offset = offset
        self.padding_idx = padding_idx
        self.layout = layout
        table = torch.empty(max_len + offset, d_model, device=device, dtype=dtype)
        if parameter:
            self.table = nn.Parameter(table, requires_grad=False)
        else:
            self.register_buffer("table", table, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """(Re)compute the table, e.g. after ``to_empty()`` from the meta device."""
        if self.table.is_meta:
            return  # no values to set (and a table for a long max_len would take seconds to compute)
        # interleaved and marian: float64, so that every row is exact to the table's dtype however long the table
        table = TABLES[self.layout](*self.table.shape, self.base)
        if self.padding_idx is not None:
            table[self.offset - 1] = 0  # the row every padding token reads
        with torch.no_grad():
            self.table.copy_(table)

    def positions_from_ids(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        if self.padding_idx is None:
            return None
        real = input_ids.ne(self.padding_idx).long()
        return real.cumsum(-1) * real - 1  # (N, L): k - 1 for the k-th real token, -1 for padding

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # detached: a frozen parameter stays fixed even where something sets it trainable (LoRA's merge does)
        table = self.table.detach()
        return x + table[positions + self.offset if self.offset else positions].to(x.dtype)  # (N, L, E)


class SinusoidalConfig(PositionalConfig):
    # The table has max_len rows, so positions past it have no encoding (see SinusoidalEncoding).
    bounded_by_max_len: ClassVar[bool] = True

    type: Literal["sinusoidal"] = "sinusoidal"
    base: float = Field(10000.0, gt=1, description="Wavelength scale: pair i has wavelength 2π·base^(2i/E).")
    offset: int = Field(
        0, ge=0, le=MAX_POSITIONS, description="Position p reads row p + offset of max_len + offset rows (M2M-100: 2)."
    )
    padding_idx: int | None = Field(
        None,
        ge=0,
        description="Number positions from the token ids, skipping this id (M2M-100: 1, with offset 2): padding "
        "reads row offset - 1, which is zero. Default positions 0 .. L-1.",
    )
    layout: Literal["interleaved", "fairseq", "marian"] = Field(
        "interleaved",
        description="interleaved: sin, cos of each pair side by side at speeds base^(-2i/E); fairseq (M2M-100): all "
        "sines then all cosines at speeds base^(-i/(E/2 - 1)); marian (Marian, Pegasus): all sines then all "
        "cosines at speeds base^(-2i/E).",
    )
    parameter: bool = Field(
        False,
        description="Hold the table as a frozen parameter (counted and saved, never trained), as transformers holds "
        "Marian's and Pegasus's; default a computed buffer, not saved.",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"base": 100.0},
        {"layout": "fairseq", "offset": 2, "padding_idx": 1},
        {"layout": "marian", "parameter": True},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        problems = []
        if ctx.d_model % 2:
            problems.append(f"sinusoidal encoding needs an even d_model, got {ctx.d_model}")
        if ctx.max_len < 1:
            problems.append(f"sinusoidal encoding needs max_len >= 1, got {ctx.max_len}")
        if self.layout == "fairseq" and ctx.d_model < 4:
            problems.append(f"layout fairseq needs d_model >= 4 (its speeds divide by E/2 - 1), got {ctx.d_model}")
        if self.padding_idx is not None and self.offset < 1:
            problems.append("padding_idx: padding reads row offset - 1, so offset must be >= 1 (M2M-100: 2)")
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        return Cost(params=(ctx.max_len + self.offset) * ctx.d_model if self.parameter else 0)
