"""``ffn: {type: none}``: no FFN sub-layer, for blocks that are their mixer alone (Mamba, Mamba-2).

zoo's block skips an FFN whose ``adds_nothing`` is True and builds no norm for it, so a Mamba block is
``x + mixer(norm(x))``, exactly as transformers' ``MambaBlock``; per-layer ``layers:`` overrides can still
give some blocks a real FFN (Jamba).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost

__all__ = ["NoFFN", "NoFFNConfig"]


class NoFFN(nn.Module):
    """No feed-forward sub-layer: the block skips it (and its norms); called directly, it adds zero."""

    adds_nothing: ClassVar[bool] = True

    def __init__(self, d_model: int, device=None, dtype=None) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


class NoFFNConfig(ComponentConfig):
    """Recipe options of ``none``: no FFN in the block (there are none)."""

    type: Literal["none"] = "none"

    def cost(self, ctx: BuildContext) -> Cost:
        """Nothing: no parameters, no work."""
        return Cost(params=0)
