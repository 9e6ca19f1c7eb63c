"""Output heads: what a model turns its final hidden states (N, L, E) into.

Every head has ``forward(h, *, mask=None)`` (``mask``: (N, L) bool, True on real tokens) and
``loss(logits, labels)``; the model decides which positions the labels align with.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.hookspecs import hookimpl
from zoo.recipe.limits import MAX_WIDTH


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over all positions whose label is not -100."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)


def pool(h: torch.Tensor, mask: torch.Tensor | None, how: str) -> torch.Tensor:
    """(N, L, E) -> (N, E): the first ([CLS]) vector, or the mean over real (unpadded) positions."""
    if how == "cls":
        return h[:, 0]
    if mask is None:
        return h.mean(dim=1)
    weights = mask.to(h.dtype).unsqueeze(-1)  # (N, L, 1)
    return (h * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


class LMHead(nn.Module):
    """Language-model head: hidden states to vocabulary logits, optionally tied to the token embedding.

    With ``proj_dim`` a bias-free ``project_out`` (E -> proj_dim) comes first and the output matrix is
    ``proj_dim`` wide: the way back of a token embedding with that ``proj_dim`` (OPT-350m: 1024 -> 512).
    """

    def __init__(
        self,
        d_model: int,
        *,
        vocab_size: int,
        tie_embeddings: bool = True,
        bias: bool = False,
        rescale: bool = False,
        softcap: float | None = None,
        proj_dim: int | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.tie_embeddings = tie_embeddings
        width = d_model if proj_dim is None else proj_dim
        self.project_out = (
            nn.Linear(d_model, width, bias=False, device=device, dtype=dtype) if proj_dim is not None else None
        )
        self.proj = nn.Linear(width, vocab_size, bias=bias, device=device, dtype=dtype)
        # T5 scales by d_model**-0.5 before a tied projection, since its embeddings are not scaled down.
        self.scale = d_model**-0.5 if rescale else 1.0
        self.softcap = softcap  # Gemma 2: logits become softcap * tanh(logits / softcap)

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.scale != 1.0:
            h = h * self.scale
        if self.project_out is not None:
            h = self.project_out(h)  # (N, L, proj_dim)
        logits = self.proj(h)  # (N, L, V)
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    loss = staticmethod(cross_entropy)


class MaskedLMHead(nn.Module):
    """BERT's masked-LM head: dense + GELU + LayerNorm transform, then a (tied) decoder with a bias."""

    def __init__(
        self,
        d_model: int,
        *,
        vocab_size: int,
        tie_embeddings: bool = True,
        eps: float = 1e-12,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.tie_embeddings = tie_embeddings
        self.transform = nn.Linear(d_model, d_model, **factory)
        self.norm = nn.LayerNorm(d_model, eps=eps, **factory)
        self.proj = nn.Linear(d_model, vocab_size, **factory)

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.proj(self.norm(F.gelu(self.transform(h))))  # (N, L, V)

    loss = staticmethod(cross_entropy)


class ClassificationHead(nn.Module):
    """Sequence (or image) classification: pool ([CLS] or masked mean), optional pooler, then a linear."""

    def __init__(
        self,
        d_model: int,
        *,
        num_classes: int,
        pool: Literal["cls", "mean"] = "cls",
        pooler: bool = False,
        dropout: float = 0.0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.pool = pool
        self.tie_embeddings = False
        self.pooler = Pooler(d_model, pool=pool, **factory) if pooler else None
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(d_model, num_classes, **factory)

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.pooler(h, mask=mask) if self.pooler is not None else pool(h, mask, self.pool)  # (N, E)
        return self.proj(self.dropout(x))  # (N, num_classes)

    loss = staticmethod(cross_entropy)


class Pooler(nn.Module):
    """BERT's pooler: the pooled vector through dense + tanh; its output is the model's ``logits``."""

    def __init__(self, d_model: int, *, pool: Literal["cls", "mean"] = "cls", device=None, dtype=None) -> None:
        super().__init__()
        self.pool = pool
        self.tie_embeddings = False
        self.dense = nn.Linear(d_model, d_model, device=device, dtype=dtype)

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.tanh(self.dense(pool(h, mask, self.pool)))  # (N, E)

    @staticmethod
    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise ValueError("the pooler head produces features, not predictions: it has no loss; use labels=None")


class LMHeadConfig(ComponentConfig):
    type: Literal["lm"] = "lm"
    tie_embeddings: bool = Field(True, description="Share the token embedding matrix as the output weight.")
    bias: bool = Field(False, description="Learn an output bias (not with tied embeddings).")
    rescale: bool = Field(False, description="Multiply hidden states by d_model**-0.5 first (T5).")
    softcap: float | None = Field(
        None, gt=0, description="Cap logits at ±softcap: softcap * tanh(logits / softcap) (Gemma 2: 30)."
    )
    proj_dim: int | None = Field(
        None,
        ge=1,
        le=MAX_WIDTH,
        description="Project hidden states to this width (bias-free linear) before the output matrix (OPT-350m: "
        "512); tied, it must equal embedding.proj_dim (filled in from it when left out). Default: no projection.",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"tie_embeddings": False, "bias": True, "rescale": True},
        {"softcap": 30.0},
        {"tie_embeddings": False, "proj_dim": 8},
    )

    @model_validator(mode="after")
    def _tied_has_no_bias(self):
        if self.tie_embeddings and self.bias:
            raise ValueError("a tied LM head has no bias: set bias: false or tie_embeddings: false")
        return self

    def check(self, ctx: BuildContext) -> list[str]:
        return [] if ctx.vocab_size >= 1 else ["an lm head predicts tokens: the recipe needs vocab_size"]

    def cost(self, ctx: BuildContext) -> Cost:
        # A tied head reuses the token table (counted with the embedding) but still multiplies by it.
        # With proj_dim P: the E·P projection first, then a V·P output matrix.
        E, V = ctx.d_model, ctx.vocab_size
        P = E if self.proj_dim is None else self.proj_dim
        project = 0 if self.proj_dim is None else E * P
        params = project + (0 if self.tie_embeddings else V * P) + (V if self.bias else 0)
        capped = V if self.softcap is not None else 0  # the capped logits are kept as well as the raw ones
        acts = E + V + capped + (0 if self.proj_dim is None else P)
        return Cost(params=params, matmul=project + V * P, acts=acts)


class MaskedLMHeadConfig(ComponentConfig):
    type: Literal["mlm"] = "mlm"
    tie_embeddings: bool = Field(True, description="Share the token embedding matrix as the decoder weight.")
    eps: float = Field(1e-12, gt=0, description="LayerNorm epsilon of the transform.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"tie_embeddings": False})

    def check(self, ctx: BuildContext) -> list[str]:
        return [] if ctx.vocab_size >= 1 else ["an mlm head predicts tokens: the recipe needs vocab_size"]

    def cost(self, ctx: BuildContext) -> Cost:
        # dense E·E + E, LayerNorm 2E, decoder V·E (tied or not) with its own V bias.
        E, V = ctx.d_model, ctx.vocab_size
        params = E * E + E + 2 * E + (0 if self.tie_embeddings else V * E) + V
        return Cost(params=params, matmul=E * E + V * E, acts=3 * E + V)


class ClassificationHeadConfig(ComponentConfig):
    type: Literal["classification"] = "classification"
    pool: Literal["cls", "mean"] = Field("cls", description="[CLS] vector or mask-aware mean of the sequence.")
    pooler: bool = Field(False, description="Dense + tanh on the pooled vector first (BERT).")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout before the classifier.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"pool": "mean", "pooler": True})

    def check(self, ctx: BuildContext) -> list[str]:
        return [] if ctx.num_classes >= 1 else ["a classification head needs num_classes in the recipe"]

    def cost(self, ctx: BuildContext) -> Cost:
        E, C = ctx.d_model, ctx.num_classes
        pooler = (E * E + E) if self.pooler else 0
        return Cost(params=pooler + E * C + C, matmul=(E * E if self.pooler else 0) + E * C, per_sequence=True)


class PoolerConfig(ComponentConfig):
    type: Literal["pooler"] = "pooler"
    pool: Literal["cls", "mean"] = Field("cls", description="[CLS] vector or mask-aware mean of the sequence.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"pool": "mean"})

    def cost(self, ctx: BuildContext) -> Cost:
        E = ctx.d_model
        return Cost(params=E * E + E, matmul=E * E, per_sequence=True)


@hookimpl
def register_components(register):
    register("head", "lm", LMHead, LMHeadConfig)
    register("head", "mlm", MaskedLMHead, MaskedLMHeadConfig)
    register("head", "classification", ClassificationHead, ClassificationHeadConfig)
    register("head", "pooler", Pooler, PoolerConfig)
