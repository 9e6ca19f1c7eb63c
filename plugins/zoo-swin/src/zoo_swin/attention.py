"""Swin's shifted-window attention (``attention: {type: swin_window}``) and the window arithmetic it rests on.

Each block attends within non-overlapping ``window_size`` x ``window_size`` windows of the patch grid; every
odd block of a stage first rolls the grid by ``window_size // 2`` (towards the top left), so that windows
straddle the previous block's borders, and masks the pairs of a window that the roll brought together from
opposite edges (transformers' mask: -100 added to their scores). Scores get a learned bias per head and
relative offset, a ((2W-1)^2, heads) table per layer. A grid whose sides are not multiples of the window is
padded with zero vectors at the bottom and right (they take part in the attention, as in transformers); a grid
no larger than the window is one window, without shift.

The config also holds the stage layout (``depths``, ``heads``): a recipe's sections are its components, so the
layout lives with the component it shapes. The module built for layer ``layer_idx`` (counted over all stages)
reads its stage, its heads and its shift from it; the ``swin`` architecture builds it at its stage's width.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, field_validator
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.init import residual_output
from zoo.label import Label

__all__ = [
    "SwinWindowAttention",
    "SwinWindowConfig",
    "relative_position_index",
    "shift_mask",
    "stage_of",
    "window_partition",
    "window_reverse",
]

MASKED = -100.0
"""What transformers adds to the score of a pair the cyclic shift brought together (not -inf)."""


def stage_of(depths: tuple[int, ...] | list[int], layer_idx: int) -> tuple[int, int]:
    """(stage, block within the stage) of block ``layer_idx``, counted over all stages."""
    start = 0
    for stage, depth in enumerate(depths):
        if layer_idx < start + depth:
            return stage, layer_idx - start
        start += depth
    raise ValueError(f"layer {layer_idx} is past the last stage (depths {list(depths)} hold {start} blocks)")


def window_partition(x: torch.Tensor, window: int) -> torch.Tensor:
    """(N, H, W, C) -> (N * H/window * W/window, window, window, C), windows in row-major order per image."""
    N, H, W, C = x.shape
    x = x.view(N, H // window, window, W // window, window, C)
    return x.transpose(2, 3).reshape(-1, window, window, C)


def window_reverse(windows: torch.Tensor, window: int, height: int, width: int) -> torch.Tensor:
    """The inverse of :func:`window_partition`: (N * windows, window, window, C) -> (N, height, width, C)."""
    C = windows.shape[-1]
    x = windows.view(-1, height // window, width // window, window, window, C)
    return x.transpose(2, 3).reshape(-1, height, width, C)


def relative_position_index(window: int) -> torch.Tensor:
    """(window^2 * window^2,) long: the row of the bias table for each (query, key) pair of a window."""
    coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)  # (T, T, 2), from 0
    return (rel[..., 0] * (2 * window - 1) + rel[..., 1]).reshape(-1)


def shift_mask(height: int, width: int, window: int, shift: int, *, device=None, dtype=torch.float32) -> torch.Tensor:
    """(windows, T, T) added to the scores of a grid rolled by ``shift``: 0 where query and key come from the
    same region of the unrolled grid, -100 where the roll brought them together (transformers' values)."""
    h, w = torch.arange(height, device=device), torch.arange(width, device=device)
    h_region = (h >= height - window).long() + (h >= height - shift).long()
    w_region = (w >= width - window).long() + (w >= width - shift).long()
    regions = (h_region[None, :, None, None] * 3 + w_region[None, None, :, None]).to(dtype)  # (1, H, W, 1)
    windows = window_partition(regions, window).reshape(-1, window * window)  # (windows, T)
    differ = windows.unsqueeze(1) != windows.unsqueeze(2)
    return torch.zeros(differ.shape, device=device, dtype=dtype).masked_fill(differ, MASKED)


class SwinWindowAttention(nn.Module):
    """Multi-head self-attention within (shifted) windows of a patch grid, with a learned relative position bias.

    Shapes: x (N, H * W, C) with ``size`` = (H, W) -> (N, H * W, C).
    """

    def __init__(
        self,
        d_model: int,
        *,
        window_size: int = 7,
        depths: tuple[int, ...] = (2, 2, 6, 2),
        heads: tuple[int, ...] = (3, 6, 12, 24),
        qkv_bias: bool = True,
        dropout: float = 0.0,
        layer_idx: int = 0,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        stage, block = stage_of(depths, layer_idx)
        self.num_heads = heads[stage]
        self.head_dim = d_model // self.num_heads
        self.window = window_size
        self.shift = window_size // 2 if block % 2 else 0
        self.dropout = dropout
        self.init_std = init_std
        self.q_proj = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.o_proj = residual_output(nn.Linear(d_model, d_model))
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window_size - 1) ** 2, self.num_heads))
        self.register_buffer("relative_position_index", relative_position_index(window_size), persistent=False)

    def reset_parameters(self) -> None:
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.o_proj):
            nn.init.normal_(proj.weight, 0.0, self.init_std)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=self.init_std)
        if not self.relative_position_index.is_meta:
            self.relative_position_index.copy_(relative_position_index(self.window))

    def bias(self, window: int) -> torch.Tensor:
        """(heads, T, T): the learned bias of every (query, key) pair of a window."""
        T = window * window
        return self.relative_position_bias_table[self.relative_position_index].view(T, T, -1).permute(2, 0, 1)

    def forward(self, x: torch.Tensor, *, size: tuple[int, int]) -> torch.Tensor:
        N, L, C = x.shape
        height, width = size
        window, shift = self.window, self.shift
        if min(height, width) <= window:  # one window covers the grid: nothing to shift (transformers' rule)
            window, shift = min(height, width), 0
        x = x.view(N, height, width, C)
        pad_b, pad_r = (window - height % window) % window, (window - width % window) % window
        x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        hp, wp = height + pad_b, width + pad_r
        if shift:
            x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
        T = window * window
        windows = window_partition(x, window).view(-1, T, C)  # (N * nW, T, C)
        B = windows.shape[0]
        q, k, v = (
            p(windows).view(B, T, self.num_heads, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj)
        )
        bias = self.bias(window).unsqueeze(0)  # (1, heads, T, T)
        if shift:
            mask = shift_mask(hp, wp, window, shift, device=x.device, dtype=bias.dtype)  # (nW, T, T)
            bias = (bias + mask.unsqueeze(1)).expand(N, -1, -1, -1, -1).reshape(B, self.num_heads, T, T)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias.to(q.dtype), dropout_p=self.dropout if self.training else 0.0
        )
        out = self.o_proj(out.transpose(1, 2).reshape(B, T, C))
        x = window_reverse(out.view(-1, window, window, C), window, hp, wp)
        if shift:
            x = torch.roll(x, shifts=(shift, shift), dims=(1, 2))
        return x[:, :height, :width].reshape(N, L, C)


class SwinWindowConfig(ComponentConfig):
    """Shifted-window attention with a relative position bias per layer (Swin); holds the stage layout."""

    type: Literal["swin_window"] = "swin_window"
    window_size: int = Field(7, ge=1, le=64, description="Side of the square windows, in patches.")
    depths: tuple[int, ...] = Field(
        (2, 2, 6, 2), min_length=1, max_length=8, description="Blocks of each stage (their sum is num_layers)."
    )
    heads: tuple[int, ...] = Field(
        (3, 6, 12, 24), min_length=1, max_length=8, description="Attention heads of each stage's blocks."
    )
    qkv_bias: bool = Field(True, description="Biases on the query, key and value projections.")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the attention weights.")

    positional_styles: ClassVar[tuple[str, ...]] = ("none",)
    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"window_size": 2, "depths": [2, 1], "heads": [2, 4]},
        {"window_size": 3, "depths": [1, 2], "heads": [1, 2], "qkv_bias": False},
    )

    @field_validator("depths", "heads")
    @classmethod
    def _positive(cls, values: tuple[int, ...]) -> tuple[int, ...]:
        if any(v < 1 for v in values):
            raise ValueError(f"every stage has at least one, got {list(values)}")
        return values

    def check(self, ctx: BuildContext) -> list[str]:
        errors = []
        if len(self.depths) != len(self.heads):
            errors.append(
                f"depths ({len(self.depths)} stages) and heads ({len(self.heads)} stages) must list the same stages"
            )
        if ctx.max_len or not ctx.image_size:
            errors.append(
                "swin_window attends within windows of an image's patch grid: it belongs to architecture 'swin', "
                "not to a stack of positions"
            )
        elif ctx.num_layers != sum(self.depths):
            blocks = sum(self.depths)
            errors.append(f"the stages hold sum(depths) = {blocks} blocks, but num_layers is {ctx.num_layers}")
        return errors

    def cost(self, ctx: BuildContext) -> Cost:
        """At its stage: ``ctx.d_model`` is the stage's width (the architecture builds it there)."""
        E = ctx.d_model
        stage, _ = stage_of(self.depths, ctx.layer_idx)
        heads = self.heads[stage]
        table = (2 * self.window_size - 1) ** 2 * heads
        params = 4 * E * E + (3 * E if self.qkv_bias else 0) + E + table
        return Cost(params=params, matmul=4 * E * E, score_width=E, window=self.window_size**2, acts=4 * E)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        stage, _ = stage_of(self.depths, ctx.layer_idx)
        heads = self.heads[stage]
        grid = -(-ctx.image_size // ctx.patch_size) if ctx.patch_size else 0
        for _ in range(stage):
            grid = -(-grid // 2)  # halved, rounded up, at each merge
        # A kind of block stands for all its stage's blocks: say how they alternate, not how this one is.
        shifts = self.depths[stage] > 1 and grid > self.window_size  # a grid within one window is never shifted
        shift = f"every second block shifted by {self.window_size // 2}" if shifts else "not shifted"
        return Label(
            "attention",
            f"Window attention · {self.type}",
            [
                f"stage {stage + 1}: {heads} heads × {ctx.d_model // heads}",
                f"{self.window_size}×{self.window_size} windows, {shift}",
                f"relative bias {(2 * self.window_size - 1) ** 2} × {heads}",
            ],
        )
