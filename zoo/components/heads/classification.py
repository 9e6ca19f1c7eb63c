"""Sequence (or image) classification (``classification``) and the pooler (``pooler``) it may apply first:
both pool the sequence to one vector ([CLS] or a masked mean); with their configs."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.label import Label

from .base import Activation, Transform, cross_entropy, pool, transform_params

VisionPool = Literal["patches", "cls_patches"]
"""Pools of an image's tokens: the mean of the patch tokens (after the ``prefix_tokens`` [CLS] and registers;
BEiT), or the [CLS] vector beside that mean, 2·E wide (DINOv2)."""


def pool_patches(h: torch.Tensor, how: str, prefix_tokens: int, mask: torch.Tensor | None = None) -> torch.Tensor:
    """(N, L, E) -> (N, E) mean of the patch tokens ``h[:, prefix_tokens:]`` (the real ones where a padding ``mask``
    (N, L) is given), or (N, 2E) [CLS] then that mean."""
    patches = pool(h[:, prefix_tokens:], None if mask is None else mask[:, prefix_tokens:], "mean")  # (N, E)
    return patches if how == "patches" else torch.cat([h[:, 0], patches], dim=-1)


class ClassificationHead(nn.Module):
    """Sequence (or image) classification: pool ([CLS] or masked mean), optional pooler, then a linear.

    The pooler is a :class:`Transform` (``pooler_activation``, ``pooler_bias``, ``pooler_norm``: ModernBERT's
    prediction head on the pooled vector). An image's tokens may also pool as ``patches`` (their mean, BEiT;
    ``pool_norm``: a LayerNorm on it, BEiT's ``use_mean_pooling``) or ``cls_patches`` ([CLS] and that mean side by
    side, a linear of 2·E inputs: DINOv2); ``prefix_tokens`` are the tokens before the patches ([CLS], registers).
    """

    def __init__(
        self,
        d_model: int,
        *,
        num_classes: int,
        pool: Literal["cls", "mean"] | VisionPool = "cls",
        pooler: bool = False,
        pooler_activation: Activation = "tanh",
        pooler_bias: bool = True,
        pooler_norm: bool = False,
        eps: float = 1e-5,
        norm_bias: bool = True,
        dropout: float = 0.0,
        distillation: bool = False,
        spare_pooler: bool = False,
        pool_norm: bool = False,
        prefix_tokens: int = 1,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.pool = pool
        self.prefix_tokens = prefix_tokens
        self.pool_norm = nn.LayerNorm(d_model, eps=eps, **factory) if pool_norm else None
        self.tie_embeddings = False
        # DeiT: a second classifier on the distillation token (position 1); the logits average the two.
        self.distill_proj = nn.Linear(d_model, num_classes, **factory) if distillation else None
        options = dict(activation=pooler_activation, bias=pooler_bias, norm=pooler_norm, eps=eps, norm_bias=norm_bias)
        self.pooler = Pooler(d_model, pool=pool, **options, **factory) if pooler else None
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(d_model * (2 if pool == "cls_patches" else 1), num_classes, **factory)
        self.spare_pooler = nn.Linear(d_model, d_model, **factory) if spare_pooler else None  # never applied

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.pool in ("patches", "cls_patches"):  # an image's tokens: (N, E), or (N, 2E) with [CLS]
            x = pool_patches(h, self.pool, self.prefix_tokens, mask)
        else:
            x = self.pooler(h, mask=mask) if self.pooler is not None else pool(h, mask, self.pool)  # (N, E)
        if self.pool_norm is not None:
            x = self.pool_norm(x)
        if self.distill_proj is not None:  # [CLS] and distillation token classified apart, averaged
            return (self.proj(self.dropout(x)) + self.distill_proj(self.dropout(h[:, 1]))) / 2
        return self.proj(self.dropout(x))  # (N, num_classes)

    loss = staticmethod(cross_entropy)


class Pooler(Transform):
    """BERT's pooler: the pooled vector through dense + tanh (a :class:`Transform`); its output is the model's
    ``logits``."""

    def __init__(
        self,
        d_model: int,
        *,
        pool: Literal["cls", "mean"] = "cls",
        activation: Activation = "tanh",
        bias: bool = True,
        norm: bool = False,
        eps: float = 1e-5,
        norm_bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        options = dict(activation=activation, bias=bias, norm=norm, eps=eps, norm_bias=norm_bias)
        super().__init__(d_model, **options, device=device, dtype=dtype)
        self.pool = pool
        self.tie_embeddings = False

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return super().forward(pool(h, mask, self.pool))  # (N, E)

    @staticmethod
    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise ValueError("the pooler head produces features, not predictions: it has no loss; use labels=None")


class ClassificationHeadConfig(ComponentConfig):
    type: Literal["classification"] = "classification"
    pool: Literal["cls", "mean", "patches", "cls_patches"] = Field(
        "cls",
        description="[CLS] vector or mask-aware mean of the sequence; for images, patches: the mean of the patch "
        "tokens (BEiT), cls_patches: [CLS] and that mean side by side, 2 x d_model (DINOv2).",
    )
    pool_norm: bool = Field(
        False, description="A LayerNorm (eps) on the pooled vector (BEiT's use_mean_pooling: on the patches' mean)."
    )
    prefix_tokens: int = Field(
        1,
        ge=0,
        le=1025,
        description="patches, cls_patches: tokens before the patches that the mean leaves out ([CLS] and "
        "registers: 1 + embedding.register_tokens).",
    )
    pooler: bool = Field(False, description="Dense + tanh on the pooled vector first (BERT).")
    pooler_activation: Activation = Field(
        "tanh",
        description="The pooler's activation (BERT, RoBERTa: tanh; DistilBERT's pre_classifier: relu; ModernBERT: "
        "gelu).",
    )
    pooler_bias: bool = Field(True, description="Bias of the pooler's dense layer (ModernBERT: classifier_bias).")
    pooler_norm: bool = Field(False, description="A LayerNorm after the pooler's activation (ModernBERT).")
    eps: float = Field(1e-5, gt=0, description="The pooler norm's epsilon.")
    norm_bias: bool = Field(True, description="Shift of the pooler's LayerNorm (ModernBERT: norm_bias).")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout before the classifier.")
    distillation: bool = Field(
        False,
        description="A second classifier on the distillation token (position 1, DeiT), averaged with the [CLS] "
        "token's; needs pool: cls, no pooler, and embedding.distillation_token.",
    )
    spare_pooler: bool = Field(
        False,
        description="Keep a dense E x E pooler that is never applied (transformers' BigBird heads keep "
        "BigBirdModel's pooler beside them).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"distillation": True},
        {"pool": "mean", "pooler": True, "spare_pooler": True},
        {"pooler": True, "pooler_activation": "relu"},
        {"pool": "mean", "pooler": True, "pooler_activation": "gelu", "pooler_bias": False, "pooler_norm": True},
        {"pool": "patches", "pool_norm": True, "eps": 1e-12},
        {"pool": "cls_patches", "prefix_tokens": 1},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        problems = [] if ctx.num_classes >= 1 else ["a classification head needs num_classes in the recipe"]
        if self.distillation and (self.pool != "cls" or self.pooler):
            problems.append("distillation classifies the [CLS] and distillation tokens: set pool: cls, pooler: false")
        if self.pool in ("patches", "cls_patches") and (self.pooler or self.distillation):
            problems.append(f"pool: {self.pool} feeds the classifier directly: set pooler: false, distillation: false")
        if self.pool in ("patches", "cls_patches") and ctx.max_len and self.prefix_tokens >= ctx.max_len:
            problems.append(
                f"prefix_tokens ({self.prefix_tokens}) leaves no patch token of the {ctx.max_len}: give the tokens "
                "before the patches ([CLS] and registers)"
            )
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        E, C = ctx.d_model, ctx.num_classes
        pooler = transform_params(E, bias=self.pooler_bias, norm=self.pooler_norm, norm_bias=self.norm_bias)
        pooler = pooler * self.pooler + (E * E + E) * self.spare_pooler
        heads = 1 + int(self.distillation)  # DeiT's second classifier
        inputs = 2 * E if self.pool == "cls_patches" else E
        return Cost(
            params=pooler + heads * (inputs * C + C) + 2 * E * self.pool_norm,
            matmul=(E * E if self.pooler else 0) + heads * inputs * C,
            per_sequence=True,
        )

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        inputs = 2 * ctx.d_model if self.pool == "cls_patches" else ctx.d_model
        lines = [
            f"pool: {self.pool}"
            + (", dense + tanh" if self.pooler else "")
            + (", LayerNorm" if self.pool_norm else ""),
            f"linear {inputs} → {ctx.num_classes}",
        ]
        return Label("head", "Classification head", lines, output=f"{ctx.num_classes} class logits")


class PoolerConfig(ComponentConfig):
    type: Literal["pooler"] = "pooler"
    pool: Literal["cls", "mean"] = Field("cls", description="[CLS] vector or mask-aware mean of the sequence.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"pool": "mean"})

    def cost(self, ctx: BuildContext) -> Cost:
        E = ctx.d_model
        return Cost(params=E * E + E, matmul=E * E, per_sequence=True)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        E = ctx.d_model
        return Label(
            "head", f"Pooler · {self.type}", [f"pool: {self.pool}", f"dense {E} → {E}, tanh"], output="pooled features"
        )


class PatchMeanPooler(nn.Module):
    """An image's features as BEiT's bare model pools them (``BeitModel`` with ``use_mean_pooling``): the mean of
    the patch tokens (after the ``prefix_tokens``) under a LayerNorm ``pool_norm``; its output is the model's
    ``logits``."""

    def __init__(self, d_model: int, *, prefix_tokens: int = 1, eps: float = 1e-12, device=None, dtype=None):
        super().__init__()
        self.prefix_tokens = prefix_tokens
        self.pool_norm = nn.LayerNorm(d_model, eps=eps, device=device, dtype=dtype)
        self.tie_embeddings = False

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.pool_norm(pool_patches(h, "patches", self.prefix_tokens, mask))  # (N, E)

    @staticmethod
    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise ValueError("the patch_mean head gives image features, not predictions: it has no loss; use labels=None")


class PatchMeanPoolerConfig(ComponentConfig):
    type: Literal["patch_mean"] = "patch_mean"
    prefix_tokens: int = Field(1, ge=0, le=1025, description="Tokens before the patches that the mean leaves out.")
    eps: float = Field(1e-12, gt=0, description="The LayerNorm's epsilon (BEiT's layer_norm_eps).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"prefix_tokens": 0, "eps": 1e-6})

    def check(self, ctx: BuildContext) -> list[str]:
        if ctx.max_len and self.prefix_tokens >= ctx.max_len:
            return [f"prefix_tokens ({self.prefix_tokens}) leaves no patch token of the {ctx.max_len}"]
        return []

    def cost(self, ctx: BuildContext) -> Cost:
        return Cost(params=2 * ctx.d_model, per_sequence=True)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        lines = [f"mean of the patch tokens (after {self.prefix_tokens}), LayerNorm"]
        return Label("head", f"Image features · {self.type}", lines, output=f"{ctx.d_model}-dim vectors")
