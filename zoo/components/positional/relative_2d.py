"""``relative_2d``: BEiT's learned bias per 2-D offset between two patches and head, added to attention scores.

An image of ``image_size`` pixels cut into patches of ``patch_size`` is a G x G grid (G = image_size / patch_size),
read in rows after a [CLS] token at position 0: position p >= 1 is the patch at row (p - 1) // G, column
(p - 1) % G. Two patches at rows (r, r') and columns (c, c') read entry ``(r - r' + G - 1) * (2G - 1) + (c - c' + G
- 1)`` of a table of ``(2G - 1)^2 + 3`` rows and one column per head; the three last rows are [CLS] to a patch,
a patch to [CLS] and [CLS] to itself. This is transformers' ``BeitRelativePositionBias`` (its relative index), so
BEiT's tables import as they are.

As the stack's ``positional`` one table is shared by every layer (BEiT's ``use_shared_relative_position_bias``);
as an attention's ``position_bias`` each layer owns its own (``use_relative_position_bias``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from torch import nn

from zoo.config import BuildContext
from zoo.cost import Cost
from zoo.label import Label

from .base import PositionalConfig, PositionalEncoding


def relative_2d_index(q_pos: torch.Tensor, k_pos: torch.Tensor, grid: int) -> torch.Tensor:
    """The table row of each (query, key) pair: (N|1, L) and (N|1, S) positions -> (N|1, L, S) long indices."""
    q, k = q_pos[:, :, None], k_pos[:, None, :]  # (N|1, L, 1), (N|1, 1, S)
    rows = (q - 1).div(grid, rounding_mode="floor") - (k - 1).div(grid, rounding_mode="floor")
    cols = (q - 1).remainder(grid) - (k - 1).remainder(grid)
    index = (rows + grid - 1) * (2 * grid - 1) + (cols + grid - 1)  # (N|1, L, S)
    entries = (2 * grid - 1) ** 2 + 3
    index = torch.where(q == 0, entries - 3, index)  # [CLS] to a patch
    index = torch.where(k == 0, entries - 2, index)  # a patch to [CLS]
    return torch.where((q == 0) & (k == 0), entries - 1, index)  # [CLS] to itself


class Relative2DBias(PositionalEncoding):
    """BEiT's relative position bias: ``relative_position_bias_table`` ((2G - 1)^2 + 3, num_heads), zero at first
    (as transformers initialises it), looked up by :func:`relative_2d_index` and added to the scores.

    Shapes: ``score_bias`` (N|1, L) and (N|1, S) positions -> (N|1, H, L, S); L and S at most 1 + G·G.
    """

    def __init__(
        self, d_model: int, *, num_heads: int, image_size: int, patch_size: int, device=None, dtype=None
    ) -> None:
        super().__init__()
        self.grid = image_size // patch_size
        entries = (2 * self.grid - 1) ** 2 + 3
        self.relative_position_bias_table = nn.Parameter(torch.zeros(entries, num_heads, device=device, dtype=dtype))

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.relative_position_bias_table)

    def score_bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        tokens = 1 + self.grid**2
        if q_pos.shape[-1] > tokens or k_pos.shape[-1] > tokens:
            raise ValueError(
                f"relative_2d holds offsets of a {self.grid} x {self.grid} patch grid and [CLS] ({tokens} tokens), "
                f"got {max(q_pos.shape[-1], k_pos.shape[-1])}: give images of the recipe's image_size"
            )
        index = relative_2d_index(q_pos, k_pos, self.grid)  # (N|1, L, S)
        return self.relative_position_bias_table[index].permute(0, 3, 1, 2)  # (N|1, L, S, H) -> (N|1, H, L, S)


class Relative2DConfig(PositionalConfig):
    type: Literal["relative_2d"] = "relative_2d"
    style: ClassVar[str] = "bias"

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({},)

    def check(self, ctx: BuildContext) -> list[str]:
        if not ctx.image_size or not ctx.patch_size:
            return ["relative_2d biases a grid of image patches: the recipe needs image_size and patch_size (vit)"]
        if ctx.causal:
            return ["relative_2d biases a grid of image patches, which a causal stack does not read"]
        return []

    def entries(self, ctx: BuildContext) -> int:
        """Rows of the table: every 2-D offset of two patches, and the three of [CLS]."""
        return (2 * (ctx.image_size // ctx.patch_size) - 1) ** 2 + 3

    def cost(self, ctx: BuildContext) -> Cost:
        return Cost(params=self.entries(ctx) * ctx.num_heads)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Shown inside every self-attention."""
        grid = ctx.image_size // ctx.patch_size
        return Label("positional", f"2-D relative bias: {grid} × {grid} patches, {self.entries(ctx)} offsets")
