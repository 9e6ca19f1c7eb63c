"""What the heads share: their loss (cross-entropy that skips label -100), pooling a sequence to one vector,
the dense transform (``Transform``) and its parameter count, the activations it may apply, and how a box
names a tied output matrix.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from zoo.components.ffn import activation_module


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over all positions whose label is not -100.

    Logits split over the vocabulary (a tensor-parallel LM head, under ``loss_parallel``) give the same loss on
    every rank, returned as the plain tensor it is, so that it adds to other losses (a mixture's balancing loss)."""
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)
    return loss.to_local() if hasattr(loss, "to_local") else loss  # a DTensor


def pool(h: torch.Tensor, mask: torch.Tensor | None, how: str) -> torch.Tensor:
    """(N, L, E) -> (N, E): the first ([CLS]) vector, the last real one (a decoder's summary of its sequence; left
    or right padding alike) or the mean over real (unpadded) positions."""
    if how == "cls":
        return h[:, 0]
    if how == "last":
        if mask is None:
            return h[:, -1]
        last = (mask.long() * torch.arange(1, h.shape[1] + 1, device=h.device)).argmax(dim=1)  # (N,)
        return h[torch.arange(h.shape[0], device=h.device), last]
    if mask is None:
        return h.mean(dim=1)
    weights = mask.to(h.dtype).unsqueeze(-1)  # (N, L, 1)
    return (h * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


Activation = Literal["gelu", "gelu_tanh", "relu", "relu2", "quick_gelu", "silu", "tanh"]
"""What a head's dense transform may apply (``tanh``: BERT's pooler; the rest as the FFNs name them)."""


class Transform(nn.Module):
    """Dense, activation, then optionally a LayerNorm: BERT's pooler (tanh), DistilBERT's pre-classifier (ReLU),
    ModernBERT's prediction head (GELU, then a norm). Shapes: (..., E) -> (..., E)."""

    def __init__(
        self,
        d_model: int,
        *,
        activation: Activation = "tanh",
        bias: bool = True,
        norm: bool = False,
        eps: float = 1e-5,
        norm_bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.dense = nn.Linear(d_model, d_model, bias=bias, **factory)
        self.activation = nn.Tanh() if activation == "tanh" else activation_module(activation)
        self.norm = nn.LayerNorm(d_model, eps=eps, bias=norm_bias, **factory) if norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.activation(self.dense(x))
        return y if self.norm is None else self.norm(y)


def _tying(tied: bool) -> str:
    """A head's output matrix in a box's words."""
    return "tied to the token embedding" if tied else "untied"


def transform_params(E: int, *, bias: bool, norm: bool, norm_bias: bool) -> int:
    """Parameters of a :class:`Transform` of width ``E``."""
    return E * E + E * bias + (E + E * norm_bias) * norm
