"""Sentence embeddings (``embedding``): the final hidden states pooled to one vector per sequence, as
sentence-transformers pools them (mean over the real tokens, the [CLS] vector or the last real token), optionally
scaled to unit length. No parameters: the vector is the model's output (``logits``), for retrieval and similarity."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.label import Label

from .base import pool

Pooling = Literal["mean", "cls", "last"]


class EmbeddingHead(nn.Module):
    """(N, L, E) hidden states -> (N, E) sentence vectors: pooled (``mean``, ``cls`` or ``last``), then divided by
    their L2 norm when ``normalize`` (so that a dot product is the cosine similarity)."""

    def __init__(self, d_model: int, *, pool: Pooling = "mean", normalize: bool = False, device=None, dtype=None):
        super().__init__()
        self.pool = pool
        self.normalize = normalize
        self.tie_embeddings = False

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        v = pool(h, mask, self.pool)  # (N, E)
        return F.normalize(v, dim=-1) if self.normalize else v

    @staticmethod
    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise ValueError("the embedding head gives sentence vectors, not predictions: it has no loss; use labels=None")


class EmbeddingHeadConfig(ComponentConfig):
    type: Literal["embedding"] = "embedding"
    pool: Pooling = Field(
        "mean",
        description="mean: average of the real (unpadded) tokens (all-MiniLM, all-mpnet); cls: the first token's "
        "vector (BGE); last: the last real token, for decoders (Qwen3-Embedding, e5-mistral).",
    )
    normalize: bool = Field(False, description="Scale each vector to unit L2 norm (sentence-transformers' Normalize).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"pool": "cls", "normalize": True}, {"pool": "last"})

    def cost(self, ctx: BuildContext) -> Cost:
        return Cost(params=0, matmul=0, per_sequence=True)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        lines = [f"pool: {self.pool}" + (", L2-normalized" if self.normalize else "")]
        return Label("head", f"Sentence embedding · {self.type}", lines, output=f"{ctx.d_model}-dim vectors")
