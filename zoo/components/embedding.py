"""Input embeddings: token ids to vectors, and images to a sequence of patch vectors."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.hookspecs import hookimpl


class TokenEmbedding(nn.Module):
    """Token ids to vectors, with optional segment (token-type) embeddings and sqrt(d_model) scaling.

    Shapes: ids (N, L) -> (N, L, E).
    """

    def __init__(
        self,
        d_model: int,
        *,
        vocab_size: int,
        padding_idx: int | None = None,
        scale: bool = False,
        type_vocab_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.token = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx, **factory)
        # BERT adds a learned segment vector; sentence A (type 0) is the default.
        self.token_type = nn.Embedding(type_vocab_size, d_model, **factory) if type_vocab_size else None
        # The original Transformer multiplies by sqrt(d_model) so the embeddings are not drowned
        # by the positional signal, whose entries are of order 1.
        self.scale = math.sqrt(d_model) if scale else 1.0

    @property
    def weight(self) -> nn.Parameter:
        """The token table: the parameter a tied output head shares."""
        return self.token.weight

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        x = self.token(input_ids)  # (N, L, E)
        if self.scale != 1.0:  # a constructor constant: no multiply at all when unscaled
            x = x * self.scale
        if self.token_type is not None:
            x = x + (self.token_type.weight[0] if token_type_ids is None else self.token_type(token_type_ids))
        return x


class PatchEmbedding(nn.Module):
    """Images to patch vectors with a Conv2d whose kernel and stride are the patch size; optional CLS.

    Shapes: images (N, C, H, W) -> (N, 1 + (H/P)*(W/P), E) with the CLS token first.
    """

    def __init__(
        self,
        d_model: int,
        *,
        image_size: int,
        patch_size: int,
        num_channels: int = 3,
        cls_token: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.proj = nn.Conv2d(num_channels, d_model, kernel_size=patch_size, stride=patch_size, **factory)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model, **factory)) if cls_token else None
        self.num_patches = (image_size // patch_size) ** 2
        self.num_positions = self.num_patches + int(cls_token)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.proj(images)  # (N, E, H/P, W/P)
        x = x.flatten(2).transpose(1, 2)  # (N, num_patches, E)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)  # (N, 1 + num_patches, E)
        return x


class TokenEmbeddingConfig(ComponentConfig):
    type: Literal["token"] = "token"
    token_input: ClassVar[bool] = True
    """It embeds token ids (an architecture that feeds images refuses it)."""
    padding_idx: int | None = Field(None, ge=0, description="Token id whose vector stays zero.")
    scale: bool = Field(False, description="Multiply embeddings by sqrt(d_model).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"padding_idx": 0, "scale": True})

    def check(self, ctx: BuildContext) -> list[str]:
        if self.padding_idx is not None and self.padding_idx >= ctx.vocab_size:
            return [f"padding_idx ({self.padding_idx}) must be < vocab_size ({ctx.vocab_size})"]
        return []

    def cost(self, ctx: BuildContext) -> Cost:
        # V·E token table plus a segment table; a lookup multiplies nothing.
        return Cost(params=(ctx.vocab_size + ctx.type_vocab_size) * ctx.d_model)


class PatchEmbeddingConfig(ComponentConfig):
    type: Literal["patch"] = "patch"
    token_input: ClassVar[bool] = False
    cls_token: bool = Field(True, description="Prepend a learned [CLS] token.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"cls_token": False})

    def cost(self, ctx: BuildContext) -> Cost:
        # A Conv2d with kernel = stride = P is one (C·P·P -> E) matmul per patch, plus its bias and the CLS vector.
        patch, E = ctx.num_channels * ctx.patch_size**2, ctx.d_model
        return Cost(params=patch * E + E + E * int(self.cls_token), matmul=patch * E, acts=patch)

    def check(self, ctx: BuildContext) -> list[str]:
        if not ctx.image_size or not ctx.patch_size:
            return ["patch embedding needs image_size and patch_size in the recipe"]
        if ctx.image_size % ctx.patch_size:
            return [f"image_size ({ctx.image_size}) must be divisible by patch_size ({ctx.patch_size})"]
        return []


@hookimpl
def register_components(register):
    register("embedding", "token", TokenEmbedding, TokenEmbeddingConfig)
    register("embedding", "patch", PatchEmbedding, PatchEmbeddingConfig)
