"""Token classification (``token_classification``): a class for every token, with its config."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost

from .base import Activation, Transform, cross_entropy, transform_params


class TokenClassificationHead(nn.Module):
    """A class for every token (named entities, part-of-speech tags): optionally a :class:`Transform` with a norm
    (ModernBERT's prediction head), dropout, then a linear (N, L, C)."""

    def __init__(
        self,
        d_model: int,
        *,
        num_classes: int,
        dropout: float = 0.0,
        transform: bool = False,
        activation: Activation = "gelu",
        transform_bias: bool = True,
        eps: float = 1e-5,
        norm_bias: bool = True,
        spare_pooler: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.tie_embeddings = False
        options = dict(activation=activation, bias=transform_bias, norm=True, eps=eps, norm_bias=norm_bias)
        self.transform = Transform(d_model, **options, **factory) if transform else None
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(d_model, num_classes, **factory)
        self.spare_pooler = nn.Linear(d_model, d_model, **factory) if spare_pooler else None  # never applied

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.transform is not None:
            h = self.transform(h)
        return self.proj(self.dropout(h))  # (N, L, C)

    loss = staticmethod(cross_entropy)


class TokenClassificationHeadConfig(ComponentConfig):
    type: Literal["token_classification"] = "token_classification"
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout before the classifier.")
    transform: bool = Field(
        False, description="Dense + activation + LayerNorm on every token first (ModernBERT's prediction head)."
    )
    activation: Activation = Field("gelu", description="The transform's activation.")
    transform_bias: bool = Field(True, description="Bias of the transform's dense layer (ModernBERT: false).")
    eps: float = Field(1e-5, gt=0, description="The transform norm's epsilon.")
    norm_bias: bool = Field(True, description="Shift of the transform's LayerNorm (ModernBERT: false).")
    spare_pooler: bool = Field(
        False,
        description="Keep a dense E x E pooler that is never applied (transformers' BigBird heads keep "
        "BigBirdModel's pooler beside them).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"dropout": 0.1, "spare_pooler": True},
        {"transform": True, "transform_bias": False, "norm_bias": False},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        return [] if ctx.num_classes >= 1 else ["a token_classification head needs num_classes in the recipe"]

    def cost(self, ctx: BuildContext) -> Cost:
        E, C = ctx.d_model, ctx.num_classes
        transform = transform_params(E, bias=self.transform_bias, norm=True, norm_bias=self.norm_bias)
        transform = transform * self.transform + (E * E + E) * self.spare_pooler
        return Cost(params=transform + E * C + C, matmul=E * C + E * E * self.transform, acts=E + C)
