"""Normalisation layers over the last dimension: LayerNorm and RMSNorm."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.hookspecs import hookimpl
from zoo.label import Label
from zoo.tensor_parallel import copy_to_ranks


def _summed(weight: torch.Tensor | None, group: Any) -> torch.Tensor | None:
    """``weight``, its gradient summed over ``group`` (None: as it is)."""
    return weight if weight is None or group is None else copy_to_ranks(weight, group)


class _Splittable:
    """What both norms do under tensor parallelism (``zoo.tensor_parallel``)."""

    gradient_group: Any = None

    def shard_tensor(self, mesh: Any) -> None:
        """Every rank holds the whole norm and normalises the whole (replicated) activations."""

    def sum_gradients_over(self, group: Any) -> None:
        """This norm sees a part of the activations on each rank of ``group`` (a per-head q/k norm of split heads, a
        block's norm under sequence parallelism), so its weights' gradients are summed over the ranks."""
        self.gradient_group = group


class LayerNorm(_Splittable, nn.Module):
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
        weight, bias = _summed(self.weight, self.gradient_group), _summed(self.bias, self.gradient_group)
        return F.layer_norm(x, self.shape, weight, bias, self.eps)


class RMSNorm(_Splittable, nn.Module):
    """Root-mean-square normalisation: divide by the RMS of the features, then scale (no mean, no shift).

    With ``offset`` the scale is ``offset + weight`` (Gemma stores its RMSNorm weight as ``w`` for a scale of
    ``1 + w``); the weight then starts at ``1 - offset`` (zeros for Gemma), so a fresh norm still scales by one,
    and the scaling happens in float32 before the cast back, as Gemma computes it.
    """

    def __init__(
        self,
        d_model: int,
        *,
        eps: float = 1e-6,
        affine: bool = True,
        offset: float = 0.0,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.eps = eps
        self.shape = (d_model,)
        self.offset = offset
        start = torch.full((d_model,), 1.0 - offset, device=device, dtype=dtype)
        self.weight = nn.Parameter(start) if affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in float32: the mean of squares under-/overflows in half precision.
        y = F.rms_norm(x.float(), self.shape, None, self.eps)
        if self.weight is None:
            return y.type_as(x)
        weight = _summed(self.weight, self.gradient_group)
        if self.offset:  # Gemma scales in float32, then casts (Llama casts, then scales)
            return (y * (self.offset + weight.float())).type_as(x)
        return y.type_as(x) * weight

    def extra_repr(self) -> str:
        return f"{self.shape[0]}, eps={self.eps}" + (f", offset={self.offset}" if self.offset else "")


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

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        return Label("norm", "LayerNorm")


class RMSNormConfig(ComponentConfig):
    type: Literal["rmsnorm"] = "rmsnorm"
    eps: float = Field(1e-6, gt=0, description="Added to the mean square for numerical stability.")
    affine: bool = Field(True, description="Learn a per-feature scale.")
    offset: float = Field(
        0.0,
        ge=-1e4,
        le=1e4,
        description="Scale by offset + weight, the weight starting at 1 - offset (Gemma: 1.0, a zero weight).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"affine": False}, {"offset": 1.0})

    @model_validator(mode="after")
    def _offset_needs_a_weight(self) -> RMSNormConfig:
        if self.offset and not self.affine:
            raise ValueError(f"offset ({self.offset}) is added to the learned weight: set affine: true or offset: 0")
        return self

    def cost(self, ctx: BuildContext) -> Cost:
        return Cost(params=ctx.d_model if self.affine else 0, acts=ctx.d_model)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        return Label("norm", "RMSNorm")


@hookimpl
def register_components(register):
    register("norm", "layernorm", LayerNorm, LayerNormConfig)
    register("norm", "rmsnorm", RMSNorm, RMSNormConfig)
