"""Normalisation layers over the last dimension: LayerNorm and RMSNorm."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.hookspecs import hookimpl


class LayerNorm(nn.Module):
    """Layer normalisation: subtract the mean, divide by the standard deviation, scale and shift."""

    def __init__(
        self,
        d_model: int,
        *,
        eps: float = 1e-5,
        bias: bool = True,
        affine: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.eps = eps
        self.shape = (d_model,)
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.ones(d_model, **factory)) if affine else None
        self.bias = nn.Parameter(torch.zeros(d_model, **factory)) if affine and bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.shape, self.weight, self.bias, self.eps)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation: divide by the RMS of the features, then scale (no mean, no shift)."""

    def __init__(self, d_model: int, *, eps: float = 1e-6, affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.eps = eps
        self.shape = (d_model,)
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype)) if affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in float32: the mean of squares under-/overflows in half precision.
        y = F.rms_norm(x.float(), self.shape, None, self.eps).type_as(x)
        return y * self.weight if self.weight is not None else y


class LayerNormConfig(ComponentConfig):
    type: Literal["layernorm"] = "layernorm"
    eps: float = Field(1e-5, gt=0, description="Added to the variance for numerical stability.")
    bias: bool = Field(True, description="Learn a shift (beta) as well as a scale.")
    affine: bool = Field(True, description="Learn any scale/shift at all.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"bias": False}, {"affine": False})

    def cost(self, ctx: BuildContext) -> Cost:
        # Scale and shift: 2E; E without the shift (bias: false); nothing when not affine.
        per_feature = (2 if self.bias else 1) if self.affine else 0
        return Cost(params=per_feature * ctx.d_model, acts=ctx.d_model)


class RMSNormConfig(ComponentConfig):
    type: Literal["rmsnorm"] = "rmsnorm"
    eps: float = Field(1e-6, gt=0, description="Added to the mean square for numerical stability.")
    affine: bool = Field(True, description="Learn a per-feature scale.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"affine": False})

    def cost(self, ctx: BuildContext) -> Cost:
        return Cost(params=ctx.d_model if self.affine else 0, acts=ctx.d_model)


@hookimpl
def register_components(register):
    register("norm", "layernorm", LayerNorm, LayerNormConfig)
    register("norm", "rmsnorm", RMSNorm, RMSNormConfig)
