"""Swin's two patch components, registered as embeddings (each turns a grid into the tokens of the next):

- ``swin_patch``: images -> a grid of patch vectors (Conv2d with kernel and stride ``patch_size``, then a
  LayerNorm), images padded at the bottom and right to a multiple of the patch first;
- ``swin_merge``: between stages, each 2x2 group of neighbours -> one vector of twice the width
  (concatenated to 4C, LayerNorm(4C), Linear(4C, 2C) without bias), an odd grid padded with zeros first.

Both return the grid's new (height, width) beside the tokens; the ``swin`` architecture carries it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.label import Label

__all__ = ["PatchMerging", "SwinMergeConfig", "SwinPatchConfig", "SwinPatchEmbedding", "merge_neighbours"]

NOT_SWIN = "belongs to architecture 'swin', whose stages carry the patch grid"


class SwinPatchEmbedding(nn.Module):
    """Images (N, C, H, W) -> (N, h * w, E) patch vectors and the grid (h, w), h = ceil(H / patch_size)."""

    def __init__(
        self, d_model: int, *, patch_size: int, num_channels: int = 3, norm_eps: float = 1e-5, init_std: float = 0.02
    ) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.init_std = init_std
        self.proj = nn.Conv2d(num_channels, d_model, kernel_size=patch_size, stride=patch_size)
        self.norm = nn.LayerNorm(d_model, eps=norm_eps)

    def reset_parameters(self) -> None:
        nn.init.normal_(self.proj.weight, 0.0, self.init_std)
        nn.init.zeros_(self.proj.bias)
        self.norm.reset_parameters()

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]:
        P = self.patch_size
        H, W = images.shape[-2:]
        images = F.pad(images, (0, (P - W % P) % P, 0, (P - H % P) % P))
        x = self.proj(images)  # (N, E, h, w)
        size = (x.shape[2], x.shape[3])
        return self.norm(x.flatten(2).transpose(1, 2)), size


class SwinPatchConfig(ComponentConfig):
    """Swin's patch embedding: a Conv2d over patches, then a LayerNorm."""

    type: Literal["swin_patch"] = "swin_patch"
    norm_eps: float = Field(1e-5, gt=0, lt=1, description="Epsilon of the LayerNorm on the patch vectors.")

    token_input: ClassVar[bool] = False
    extra_tokens: ClassVar[int] = 0
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"norm_eps": 1e-6})

    def check(self, ctx: BuildContext) -> list[str]:
        return [] if ctx.patch_size and not ctx.max_len else [f"swin_patch {NOT_SWIN}"]

    def cost(self, ctx: BuildContext) -> Cost:
        E, P, C = ctx.d_model, ctx.patch_size, ctx.num_channels
        return Cost(params=C * P * P * E + E + 2 * E, matmul=C * P * P * E, acts=C * P * P + 2 * E)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        P = ctx.patch_size
        return Label("embedding", "Patch embedding · swin_patch", [f"{P}×{P} patches → {ctx.d_model}", "LayerNorm"])


def merge_neighbours(x: torch.Tensor, size: tuple[int, int]) -> tuple[torch.Tensor, tuple[int, int]]:
    """(N, H * W, C) -> (N, ceil(H/2) * ceil(W/2), 4C): each 2x2 group's vectors side by side, in transformers'
    order (top left, bottom left, top right, bottom right); an odd side is padded with zeros."""
    N, _, C = x.shape
    H, W = size
    x = F.pad(x.view(N, H, W, C), (0, 0, 0, W % 2, 0, H % 2))
    x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], dim=-1)
    return x.reshape(N, -1, 4 * C), (x.shape[1], x.shape[2])


class PatchMerging(nn.Module):
    """(N, H * W, C) and (H, W) -> (N, ceil(H/2) * ceil(W/2), 2C) and the halved grid."""

    def __init__(self, d_model: int, *, norm_eps: float = 1e-5, init_std: float = 0.02) -> None:
        super().__init__()
        self.init_std = init_std
        self.norm = nn.LayerNorm(4 * d_model, eps=norm_eps)
        self.reduction = nn.Linear(4 * d_model, 2 * d_model, bias=False)

    def reset_parameters(self) -> None:
        self.norm.reset_parameters()
        nn.init.normal_(self.reduction.weight, 0.0, self.init_std)

    def forward(self, x: torch.Tensor, size: tuple[int, int]) -> tuple[torch.Tensor, tuple[int, int]]:
        x, size = merge_neighbours(x, size)
        return self.reduction(self.norm(x)), size


class SwinMergeConfig(ComponentConfig):
    """Swin's patch merging between stages: 2x2 neighbours concatenated, LayerNorm(4C), Linear(4C, 2C)."""

    type: Literal["swin_merge"] = "swin_merge"
    norm_eps: float = Field(1e-5, gt=0, lt=1, description="Epsilon of the LayerNorm on the concatenated vectors.")

    token_input: ClassVar[bool] = False
    extra_tokens: ClassVar[int] = 0
    examples: ClassVar[tuple[dict[str, Any], ...]] = ()
    """None of its own: it is no recipe's ``embedding`` (the ``swin`` architecture builds one between each two
    stages), so the contract checks it inside the swin models of the attention's and patch embedding's cases."""

    def check(self, ctx: BuildContext) -> list[str]:
        return [f"swin_merge {NOT_SWIN}: it is built between stages, not named as a recipe's embedding"]

    def cost(self, ctx: BuildContext) -> Cost:
        """At the width ``ctx.d_model`` of the stage it ends."""
        C = ctx.d_model
        return Cost(params=8 * C + 8 * C * C, matmul=8 * C * C, acts=8 * C)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        C = ctx.d_model
        return Label("embedding", "Patch merging · swin_merge", ["2×2 neighbours", f"{4 * C} → {2 * C}"])
