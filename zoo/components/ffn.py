"""Position-wise feed-forward networks: the classic two-layer MLP and the gated family (SwiGLU, ...).

Every FFN maps ``(N, L, E) -> (N, L, E)`` and acts on each position independently. They share one
constructor shape, ``Cls(d_model, *, hidden=None, ..., bias, dropout, device=None, dtype=None)``, so a
recipe can swap one for another by changing ``type``. Activations are looked up by name in
``ACTIVATIONS`` through ``activation_module``, the one place that turns a name into a module.

Dropout, when enabled, is applied once, to the FFN output (after ``down_proj``), as in GPT-2 and BERT:
the block around the FFN should therefore not add a second dropout on this branch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar, Literal

import torch
import torch.nn as nn
from pydantic import Field

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.hookspecs import hookimpl
from zoo.init import residual_output
from zoo.limits import MAX_WIDTH
from zoo.registry import preset
from zoo.tensor_parallel import check_divides, refuse

Activation = Literal["relu", "relu2", "gelu", "gelu_tanh", "quick_gelu", "silu", "xielu", "identity"]


class ReLUSquared(nn.Module):
    """``relu(x)²`` (So et al., Primer; Persimmon, Arcee)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x).square()


class QuickGELU(nn.Module):
    """``x · sigmoid(1.702 x)``: the sigmoid approximation of GELU that CLIP was trained with."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class XIELU(nn.Module):
    """xIELU (Huang and Schlag, 2024; Apertus), with two learned scalars per layer:
    ``αp·x² + β·x`` for x > 0 and ``(expm1(min(x, ε)) - x)·αn + β·x`` otherwise, where ``αp = softplus(alpha_p)``
    and ``αn = β + softplus(alpha_n)``. ``beta`` and ``eps`` are constants, kept as buffers as checkpoints hold them.
    """

    learned = True

    def __init__(
        self,
        alpha_p_init: float = 0.8,
        alpha_n_init: float = 0.8,
        beta: float = 0.5,
        eps: float = -1e-6,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.inits = (alpha_p_init, alpha_n_init - beta)
        self.constants = (beta, eps)
        self.alpha_p = nn.Parameter(torch.empty(1, device=device, dtype=dtype))
        self.alpha_n = nn.Parameter(torch.empty(1, device=device, dtype=dtype))
        self.register_buffer("beta", torch.tensor(beta, device=device, dtype=dtype))
        self.register_buffer("eps", torch.tensor(eps, device=device, dtype=dtype))
        self.fill_weights()

    @torch.no_grad()
    def fill_weights(self, std: float = 0.0, residual_std: float = 0.0) -> None:
        """The initial αp and αn (0.8 each), stored through softplus's inverse."""
        if self.alpha_p.is_meta:
            return
        for param, value in zip((self.alpha_p, self.alpha_n), self.inits, strict=True):
            param.fill_(math.log(math.expm1(value)))
        for buffer, value in zip((self.beta, self.eps), self.constants, strict=True):
            buffer.fill_(value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha_p = nn.functional.softplus(self.alpha_p)
        alpha_n = self.beta + nn.functional.softplus(self.alpha_n)
        positive = alpha_p * x * x + self.beta * x
        negative = (torch.expm1(torch.minimum(x, self.eps)) - x) * alpha_n + self.beta * x
        return torch.where(x > 0, positive, negative)


ACTIVATIONS: dict[str, Callable[..., nn.Module]] = {
    "relu": nn.ReLU,
    "relu2": ReLUSquared,
    "gelu": nn.GELU,  # exact (erf) GELU, as in BERT and GeGLU
    "gelu_tanh": functools.partial(nn.GELU, approximate="tanh"),  # GPT-2's approximation
    "quick_gelu": QuickGELU,  # CLIP's
    "silu": nn.SiLU,
    "xielu": XIELU,
    "identity": nn.Identity,  # no activation: the bilinear GLU
}
"""Activation name -> zero-argument constructor of the activation module."""


def activation_module(name: str, **factory_kwargs: Any) -> nn.Module:
    """A fresh activation module for ``name`` (one of ``ACTIVATIONS``); one that learns (xIELU) gets its
    parameters on ``factory_kwargs``' device and dtype.

    Raises:
        ValueError: ``name`` is not a known activation; the message lists the choices.
    """
    try:
        make = ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; choose one of: {', '.join(ACTIVATIONS)}") from None
    return make(**factory_kwargs) if getattr(make, "learned", False) else make()


class SigmoidGate(nn.Module):
    """``x * sigmoid(alpha * x)``: SiLU with a gain in its sigmoid (gpt-oss's experts: 1.702)."""

    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x * self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


def glu(act: nn.Module, gate: torch.Tensor, up: torch.Tensor, limit: float | None, up_shift: float) -> torch.Tensor:
    """``act(gate) * (up + up_shift)``, the gate first clamped to at most ``limit`` and ``up`` to
    ``[-limit, limit]`` (None: no clamp). With neither, exactly ``act(gate) * up``."""
    if limit is not None:
        gate, up = gate.clamp(max=limit), up.clamp(-limit, limit)
    if up_shift:
        up = up + up_shift
    return act(gate) * up


def _dropout(p: float) -> nn.Module:
    # Identity when off keeps forward a straight line and adds nothing to the module tree's behaviour.
    return nn.Dropout(p) if p > 0 else nn.Identity()


def split_hidden(ffn: nn.Module, mesh: Any, first: tuple[str, ...]) -> None:
    """An FFN's tensor-parallel plan: the ``first`` projections column-wise, ``down_proj`` row-wise."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    size, hidden = mesh.size(), ffn.down_proj.in_features
    check_divides(f"{type(ffn).__name__} of hidden width {hidden}", size, hidden=hidden)
    if any(True for _ in ffn.act.parameters()):  # learned per-feature or scalar: summed over ranks otherwise
        refuse(f"{type(ffn).__name__}", f"the learned activation {type(ffn.act).__name__}", size)
    parallelize_module(ffn, mesh, {**dict.fromkeys(first, ColwiseParallel()), "down_proj": RowwiseParallel()})


class MLP(nn.Module):
    """Two-layer MLP: down_proj(act(up_proj(x))), hidden = 4 * d_model by default (GPT-2, BERT, ViT).

    Args:
        d_model: width E of the input and output.
        hidden: width H of the hidden layer; ``None`` means ``4 * d_model``.
        activation: a name from ``ACTIVATIONS``.
        bias: whether both projections have a bias.
        dropout: dropout probability on the output.
        device: device of the parameters.
        dtype: dtype of the parameters.
    """

    # LoRA (zoo.lora) may adapt these linears: attribute -> the kind that train.lora.targets selects.
    adaptable: ClassVar[dict[str, str]] = {"up_proj": "ffn", "down_proj": "ffn"}

    def __init__(
        self,
        d_model: int,
        *,
        hidden: int | None = None,
        activation: str = "gelu",
        bias: bool = True,
        dropout: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory_kwargs = {"device": device, "dtype": dtype}
        hidden = 4 * d_model if hidden is None else hidden
        self.up_proj = nn.Linear(d_model, hidden, bias=bias, **factory_kwargs)
        self.act = activation_module(activation, **factory_kwargs)
        self.down_proj = residual_output(nn.Linear(hidden, d_model, bias=bias, **factory_kwargs))
        self.dropout = _dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (N, L, E) -> (N, L, E); H is the hidden width."""
        h = self.act(self.up_proj(x))  # (N, L, H)
        return self.dropout(self.down_proj(h))  # (N, L, E)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the hidden width splits over the ranks, up column-wise,
        down row-wise (the ranks' partial outputs summed)."""
        split_hidden(self, mesh, ("up_proj",))


def gated_hidden(d_model: int, multiple_of: int = 256) -> int:
    """Default hidden width of a gated FFN: ``int(8 * d_model / 3)`` rounded up to ``multiple_of``.

    Two thirds of the MLP's ``4 * d_model`` keeps the parameter count of three matrices close to that of
    the two-matrix MLP; rounding up keeps matmuls aligned. This is Llama's rule (4096 -> 11008).
    """
    return multiple_of * math.ceil(int(8 * d_model / 3) / multiple_of)


class GatedMLP(nn.Module):
    """Gated FFN: down_proj(act(gate_proj(x)) * up_proj(x)) (GLU variants, Shazeer 2020).

    ``SwiGLU``, ``GeGLU``, ``ReGLU`` and ``Bilinear`` are presets of this module: the activation fixed by their name.
    gpt-oss's experts clamp their SwiGLU and shift the up projection: ``alpha=1.702, limit=7.0, up_shift=1.0``
    compute ``down_proj(g * sigmoid(1.702 g) * (u + 1))`` with ``g = min(gate_proj(x), 7)`` and ``u =
    up_proj(x)`` clamped to ``[-7, 7]`` (see :func:`glu`).

    Args:
        d_model: width E of the input and output.
        hidden: width H of the gate and up projections; ``None`` means ``gated_hidden(d_model,
            multiple_of)``.
        activation: a name from ``ACTIVATIONS``, applied to the gate.
        multiple_of: rounding of the default hidden width (ignored when ``hidden`` is given).
        bias: whether the three projections have a bias (Llama and PaLM use none).
        dropout: dropout probability on the output.
        alpha: the gain of the sigmoid in ``silu`` (``x * sigmoid(alpha * x)``); 1.0 is plain SiLU.
        limit: clamp the gate to at most ``limit`` and the up projection to ``[-limit, limit]``; None: no clamp.
        up_shift: added to the up projection (after the clamp) before it multiplies the gate.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Raises:
        ValueError: an ``alpha`` other than 1.0 with an activation other than ``silu``.
    """

    # LoRA (zoo.lora) may adapt these linears: attribute -> the kind that train.lora.targets selects.
    adaptable: ClassVar[dict[str, str]] = {"gate_proj": "ffn", "up_proj": "ffn", "down_proj": "ffn"}

    def __init__(
        self,
        d_model: int,
        *,
        hidden: int | None = None,
        activation: str = "silu",
        multiple_of: int = 256,
        bias: bool = False,
        dropout: float = 0.0,
        alpha: float = 1.0,
        limit: float | None = None,
        up_shift: float = 0.0,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory_kwargs = {"device": device, "dtype": dtype}
        hidden = gated_hidden(d_model, multiple_of) if hidden is None else hidden
        self.gate_proj = nn.Linear(d_model, hidden, bias=bias, **factory_kwargs)
        self.up_proj = nn.Linear(d_model, hidden, bias=bias, **factory_kwargs)
        if alpha != 1.0 and activation != "silu":
            raise ValueError(f"alpha is the gain of silu's sigmoid; the activation is {activation!r}")
        self.act = activation_module(activation, **factory_kwargs) if alpha == 1.0 else SigmoidGate(alpha)
        self.limit, self.up_shift = limit, up_shift
        self.down_proj = residual_output(nn.Linear(hidden, d_model, bias=bias, **factory_kwargs))
        self.dropout = _dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (N, L, E) -> (N, L, E); H is the hidden width."""
        h = glu(self.act, self.gate_proj(x), self.up_proj(x), self.limit, self.up_shift)  # (N, L, H)
        return self.dropout(self.down_proj(h))  # (N, L, E)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the hidden width splits over the ranks, gate and up
        column-wise, down row-wise (the ranks' partial outputs summed)."""
        split_hidden(self, mesh, ("gate_proj", "up_proj"))


SwiGLU = preset(
    GatedMLP, "SwiGLU FFN: down_proj(silu(gate_proj(x)) * up_proj(x)) (PaLM, Llama, Mistral).", activation="silu"
)
GeGLU = preset(
    GatedMLP,
    "GeGLU FFN: down_proj(gelu(gate_proj(x)) * up_proj(x)) (Shazeer 2020; T5 v1.1 with tanh).",
    activation="gelu",
)
ReGLU = preset(GatedMLP, "ReGLU FFN: down_proj(relu(gate_proj(x)) * up_proj(x)).", activation="relu")
Bilinear = preset(
    GatedMLP,
    "Bilinear GLU FFN: down_proj(gate_proj(x) * up_proj(x)), no activation (Shazeer 2020).",
    activation="identity",
)


class MLPConfig(ComponentConfig):
    """Two-layer MLP."""

    type: Literal["mlp"] = "mlp"
    hidden: int | None = Field(None, ge=1, le=MAX_WIDTH, description="Hidden width; None means 4 * d_model.")
    activation: Activation = Field("gelu", description="Activation between the two projections.")
    bias: bool = Field(True, description="Bias on both projections.")
    dropout: float = Field(0.0, ge=0.0, le=1.0, description="Dropout probability on the output.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"hidden": 24, "activation": "relu", "bias": False},
        {"activation": "relu2"},
        {"activation": "quick_gelu"},
        {"hidden": 12, "activation": "xielu", "bias": False},
    )

    def cost(self, ctx: BuildContext) -> Cost:
        E = ctx.d_model
        H = self.hidden if self.hidden is not None else 4 * E
        learned = 2 if self.activation == "xielu" else 0  # xIELU's two scalars
        return Cost(params=2 * E * H + ((H + E) if self.bias else 0) + learned, matmul=2 * E * H, acts=E + 2 * H)


class GatedConfig(ComponentConfig):
    """Fields shared by the gated FFNs; the activation is fixed by the component's name."""

    hidden: int | None = Field(
        None, ge=1, le=MAX_WIDTH, description="Hidden width; None means int(8 * d_model / 3) rounded up to multiple_of."
    )
    multiple_of: int = Field(256, ge=1, le=MAX_WIDTH, description="Rounding of the default hidden width.")
    bias: bool = Field(False, description="Bias on the three projections.")
    dropout: float = Field(0.0, ge=0.0, le=1.0, description="Dropout probability on the output.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"multiple_of": 8}, {"hidden": 20, "bias": True})

    def cost(self, ctx: BuildContext) -> Cost:
        E = ctx.d_model
        H = self.hidden if self.hidden is not None else gated_hidden(E, self.multiple_of)
        # gate, up: E·H each; down: H·E. Saved: input, gate, up, act(gate), their product.
        return Cost(params=3 * E * H + ((2 * H + E) if self.bias else 0), matmul=3 * E * H, acts=E + 4 * H)


class SwiGLUConfig(GatedConfig):
    """SwiGLU: silu-gated FFN, optionally clamped and shifted as gpt-oss's experts."""

    type: Literal["swiglu"] = "swiglu"
    alpha: float = Field(
        1.0, gt=0, description="Gain of the gate's sigmoid, gate * sigmoid(alpha * gate); 1.0 is SiLU (gpt-oss: 1.702)."
    )
    limit: float | None = Field(
        None,
        gt=0,
        description="Clamp the gate to at most limit and the up projection to [-limit, limit] (gpt-oss: 7.0); "
        "None: no clamp.",
    )
    up_shift: float = Field(0.0, description="Added to the up projection before it gates (gpt-oss: 1.0).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        *GatedConfig.examples,
        {"hidden": 20, "bias": True, "alpha": 1.702, "limit": 0.5, "up_shift": 1.0},  # gpt-oss's experts
    )


class GeGLUConfig(GatedConfig):
    """GeGLU: gelu-gated FFN."""

    type: Literal["geglu"] = "geglu"
    approximate: Literal["none", "tanh"] = Field("none", description="Exact GELU, or its tanh approximation (T5 v1.1).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"multiple_of": 8}, {"hidden": 20, "approximate": "tanh"})

    def arguments(self) -> dict[str, Any]:
        args = super().arguments()
        approximate = args.pop("approximate")
        return {**args, "activation": "gelu" if approximate == "none" else "gelu_tanh"}


class ReGLUConfig(GatedConfig):
    """ReGLU: relu-gated FFN."""

    type: Literal["reglu"] = "reglu"


class BilinearConfig(GatedConfig):
    """Bilinear GLU: the gate multiplies without an activation."""

    type: Literal["bilinear"] = "bilinear"


@hookimpl
def register_components(register):
    register("ffn", "mlp", MLP, MLPConfig)
    register("ffn", "swiglu", SwiGLU, SwiGLUConfig)
    register("ffn", "geglu", GeGLU, GeGLUConfig)
    register("ffn", "reglu", ReGLU, ReGLUConfig)
    register("ffn", "bilinear", Bilinear, BilinearConfig)
