"""ELECTRA's discriminator (``rtd``, replaced-token detection): one logit per token, that the token was put there
by a generator rather than written: a dense + activation transform, then a linear to one output; with its config."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.label import Label

from .base import Activation, Transform, transform_params


class ReplacedTokenHead(nn.Module):
    """(N, L, E) -> (N, L) logits of "replaced": ``proj(transform(h))``, a dense + activation (ElectraForPreTraining's
    ``discriminator_predictions``)."""

    def __init__(self, d_model: int, *, activation: Activation = "gelu", device=None, dtype=None) -> None:
        super().__init__()
        self.tie_embeddings = False
        self.transform = Transform(d_model, activation=activation, device=device, dtype=dtype)
        self.proj = nn.Linear(d_model, 1, device=device, dtype=dtype)

    def forward(self, h: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.proj(self.transform(h)).squeeze(-1)  # (N, L)

    @staticmethod
    def loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Binary cross-entropy over the positions whose label is not -100 (1: replaced, 0: original)."""
        counted = labels != -100
        return F.binary_cross_entropy_with_logits(logits[counted].float(), labels[counted].float())


class ReplacedTokenHeadConfig(ComponentConfig):
    type: Literal["rtd"] = "rtd"
    activation: Activation = Field("gelu", description="The transform's activation (ELECTRA: hidden_act, gelu).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"activation": "relu"})

    def cost(self, ctx: BuildContext) -> Cost:
        E = ctx.d_model  # the dense transform, then E -> 1 with its bias
        params = transform_params(E, bias=True, norm=False, norm_bias=False) + E + 1
        return Cost(params=params, matmul=E * E + E, acts=2 * E + 1)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        lines = [f"dense {ctx.d_model} → {ctx.d_model}, {self.activation}", f"linear {ctx.d_model} → 1"]
        return Label("head", f"Replaced-token detection · {self.type}", lines, output="a logit per token")
