r"""Mamba's selective-scan mixer (Gu & Dao 2023) as a token mixer of zoo's attention kind.

One layer, for an input ``x`` (N, L, E), as transformers' ``MambaMixer`` computes it::

    u, z   = split(in_proj(x))                     (N, L, I) each, I = expand * E
    u      = silu(causal_depthwise_conv(u))        kernel K
    dt, B, C = split(x_proj(u))                    rank R, state S, state S
    dt, B, C = rms(dt), rms(B), rms(C)             only with inner_norms (Jamba's Mamba layers)
    delta  = softplus(dt_proj(dt))                 (N, L, I)
    h_t    = exp(delta_t A) * h_(t-1) + delta_t B_t u_t      A = -exp(A_log): (I, S), h: (N, I, S)
    y_t    = C_t . h_t + D * u_t
    out    = out_proj(y * silu(z))

The recurrence ``h_t = a_t h_(t-1) + b_t`` is linear, so a whole sequence is scanned in parallel
(:func:`linear_scan`, log2(L) doubling steps); decoding takes one step at a time from a fixed-size state
(the last K - 1 convolution inputs and ``h``). Both forms compute the same function, in float32.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.components.norm import RMSNorm
from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.init import residual_output
from zoo.label import Label, options, wrap

from .common import SSMState, causal_conv, real_tokens

__all__ = ["Mamba", "MambaConfig", "linear_scan", "selective_scan"]


def linear_scan(a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
    """Every ``h_t = a_t * h_(t-1) + b_t`` along dim 1 (``h_(-1) = h0``, or zeros), in log2(L) parallel steps.

    ``a``, ``b``: (N, L, ...); ``h0``: (N, ...). Hillis-Steele: after the step of width k, position t holds the
    composition of the 2k steps ending at t. ``a`` lies in (0, 1], so its products never overflow.
    """
    if h0 is not None:
        b = torch.cat([a[:, :1] * h0[:, None] + b[:, :1], b[:, 1:]], dim=1)
    k, L = 1, a.size(1)
    while k < L:
        # Shift by k along dim 1, filling with the identity step (a = 1, b = 0).
        fill = [0, 0] * (a.dim() - 2) + [k, 0]
        b = b + a * F.pad(b[:, : L - k], fill)
        a = a * F.pad(a[:, : L - k], fill, value=1.0)
        k *= 2
    return b


def selective_scan(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor,
    state: torch.Tensor | None = None,
    *,
    recurrent: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The selective SSM over a chunk, after ``state``; float32 throughout.

    Args:
        u, delta: (N, L, I) input and (softplus'ed) step size.
        A: (I, S), negative. B, C: (N, L, S). D: (I,).
        state: (N, I, S) state before the chunk, or None (zeros).
        recurrent: one token at a time (the decoding form) instead of the parallel scan.

    Returns:
        y (N, L, I) = C . h + D u, and the state after the chunk (N, I, S).
    """
    u, delta, B, C = u.float(), delta.float(), B.float(), C.float()
    dA = torch.exp(delta[..., None] * A.float())  # (N, L, I, S)
    dBu = (delta * u)[..., None] * B[:, :, None, :]  # (N, L, I, S)
    if recurrent:
        h = state if state is not None else dA.new_zeros(dA[:, 0].shape)
        states = []
        for t in range(u.size(1)):
            h = dA[:, t] * h + dBu[:, t]
            states.append(h)
        hs = torch.stack(states, dim=1)  # (N, L, I, S)
    else:
        hs = linear_scan(dA, dBu, state)
    y = torch.einsum("nlis,nls->nli", hs, C) + u * D.float()
    return y, hs[:, -1]


class Mamba(nn.Module):
    """Mamba's selective state-space mixer (S6): input-dependent step, B and C; a fixed-size decoding state.

    Padding: ``mask`` (True = may attend, as every zoo attention gets it) is read for the chunk's padded
    tokens, whose inputs are zeroed before the input projection and after the convolution, as transformers
    does. Positions are not used: the mixer is causal by its convolution and scan (``positional: none``).

    Args:
        d_model: width E of the input and output.
        state_size: S, the state per channel.
        expand: I = expand * E inner channels (unless ``intermediate_size`` is given).
        intermediate_size: I directly.
        conv_kernel: K, the width of the causal depthwise convolution.
        time_step_rank: R, the rank of the step-size projection; None means ceil(E / 16).
        bias: biases in in_proj and out_proj. conv_bias: a bias in the convolution.
        dt_min, dt_max, dt_floor: the range of the initial step sizes (Mamba's dt init).
        inner_norms: RMSNorm on dt, B and C after ``x_proj`` (Jamba's ``dt_layernorm``, ``b_layernorm``,
            ``c_layernorm``); ``norm_eps`` is their epsilon, ``inner_norm_weights`` whether they learn a scale
            (Jamba's do, FalconMamba's do not).
        init_std, num_layers: the recipe's init (projections; out_proj scaled by 1/sqrt(2 * num_layers)).
        causal, cross: what the stack asks for; Mamba is a causal self-mixer only.
    """

    def __init__(
        self,
        d_model: int,
        *,
        state_size: int = 16,
        expand: int = 2,
        intermediate_size: int | None = None,
        conv_kernel: int = 4,
        time_step_rank: int | None = None,
        bias: bool = False,
        conv_bias: bool = True,
        dt_min: float = 0.001,
        dt_max: float = 0.1,
        dt_floor: float = 1e-4,
        inner_norms: bool = False,
        norm_eps: float = 1e-6,
        inner_norm_weights: bool = True,
        init_std: float = 0.02,
        num_layers: int = 1,
        causal: bool = True,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if cross or not causal:
            raise ValueError(f"mamba is a causal self-mixer only (got causal={causal}, cross={cross})")
        self.state_size = state_size
        self.inner = intermediate_size if intermediate_size is not None else expand * d_model
        self.rank = time_step_rank if time_step_rank is not None else math.ceil(d_model / 16)
        self.dt_range = (dt_min, dt_max, dt_floor)
        self.init_std, self.num_layers = init_std, num_layers
        factory = {"device": device, "dtype": dtype}
        I, S, R = self.inner, state_size, self.rank
        self.in_proj = nn.Linear(d_model, 2 * I, bias=bias, **factory)
        self.conv1d = nn.Conv1d(I, I, conv_kernel, groups=I, bias=conv_bias, **factory)
        self.x_proj = nn.Linear(I, R + 2 * S, bias=False, **factory)
        self.dt_proj = nn.Linear(R, I, bias=True, **factory)
        self.A_log = nn.Parameter(torch.empty(I, S, **factory))
        self.D = nn.Parameter(torch.empty(I, **factory))
        self.out_proj = residual_output(nn.Linear(I, d_model, bias=bias, **factory))
        affine = inner_norm_weights
        norms = (RMSNorm(R, eps=norm_eps, affine=affine, **factory), RMSNorm(S, eps=norm_eps, affine=affine, **factory))
        self.dt_layernorm, self.b_layernorm = norms if inner_norms else (None, None)
        self.c_layernorm = RMSNorm(S, eps=norm_eps, affine=affine, **factory) if inner_norms else None
        if self.A_log.device.type != "meta":
            self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Mamba's init: A = -(1..S) per channel, D = 1, step sizes log-uniform in [dt_min, dt_max]."""
        for linear in (self.in_proj, self.x_proj, self.out_proj):
            std = self.init_std / math.sqrt(2 * self.num_layers) if linear is self.out_proj else self.init_std
            nn.init.normal_(linear.weight, std=std)
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)
        self.conv1d.reset_parameters()
        nn.init.uniform_(self.dt_proj.weight, -(self.rank**-0.5), self.rank**-0.5)
        lo, hi, floor = self.dt_range
        dt = torch.exp(torch.rand_like(self.D, dtype=torch.float32) * (math.log(hi) - math.log(lo)) + math.log(lo))
        dt = dt.clamp(min=floor)
        self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
        A = torch.arange(1, self.state_size + 1, dtype=torch.float32, device=self.A_log.device)
        self.A_log.copy_(torch.log(A).expand_as(self.A_log))
        nn.init.ones_(self.D)
        for norm in (self.dt_layernorm, self.b_layernorm, self.c_layernorm):
            if norm is not None and norm.weight is not None:
                nn.init.ones_(norm.weight)

    def new_cache(self, batch_size: int, max_len: int) -> SSMState:
        """The fixed-size state (its size depends on neither ``max_len`` nor how many tokens are decoded)."""
        return SSMState()

    def forward(
        self,
        x: torch.Tensor,
        *,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        pos: Any = None,
        cache: SSMState | None = None,
    ) -> torch.Tensor:
        """``x`` (N, L, E) -> (N, L, E). ``mask`` (N|1, 1, L, S) bool, read for padding only; ``cache`` from
        :meth:`new_cache` (a chunk of one token takes the recurrent step); ``positions``, ``pos`` and
        ``context`` are not used."""
        L = x.size(1)
        real = real_tokens(mask, L)
        if real is not None:
            x = x * real.to(x.dtype)
        u, z = self.in_proj(x).chunk(2, dim=-1)  # (N, L, I) each
        u, conv_state = causal_conv(u, self.conv1d.weight, self.conv1d.bias, None if cache is None else cache.conv)
        u = F.silu(u)
        if real is not None:
            u = u * real.to(u.dtype)
        dt, B, C = self.x_proj(u).split([self.rank, self.state_size, self.state_size], dim=-1)
        if self.dt_layernorm is not None:
            dt, B, C = self.dt_layernorm(dt), self.b_layernorm(B), self.c_layernorm(C)
        delta = F.softplus(self.dt_proj(dt).float())  # (N, L, I)
        A = -torch.exp(self.A_log.float())  # (I, S)
        state = None if cache is None else cache.ssm
        y, state = selective_scan(u, delta, A, B, C, self.D, state, recurrent=cache is not None and L == 1)
        if cache is not None:
            cache.update(conv_state, state, L)
        y = y * F.silu(z.float())
        return self.out_proj(y.to(x.dtype))  # (N, L, E)

    def extra_repr(self) -> str:
        return f"inner={self.inner}, state_size={self.state_size}, time_step_rank={self.rank}"


class MambaConfig(ComponentConfig):
    """Recipe options of ``mamba``: Mamba's selective-scan mixer (decoder stacks only, ``positional: none``)."""

    type: Literal["mamba"] = "mamba"
    requires_causal: ClassVar[bool] = True
    supports_cross: ClassVar[bool] = False
    # Positions reach a Mamba layer only through the stream (an absolute embedding); nothing rotates or biases.
    positional_styles: ClassVar[frozenset[str]] = frozenset({"none", "embed"})
    state_size: int = Field(16, ge=1, le=1024, description="S: state features per channel.")
    expand: int = Field(2, ge=1, le=16, description="Inner channels I = expand * d_model.")
    intermediate_size: int | None = Field(None, ge=1, le=1 << 17, description="I directly (overrides expand).")
    conv_kernel: int = Field(4, ge=1, le=64, description="K: width of the causal depthwise convolution.")
    time_step_rank: int | None = Field(None, ge=1, le=1 << 14, description="R; default ceil(d_model / 16).")
    bias: bool = Field(False, description="Biases in in_proj and out_proj.")
    conv_bias: bool = Field(True, description="A bias in the convolution.")
    dt_min: float = Field(0.001, gt=0, description="Smallest initial step size.")
    dt_max: float = Field(0.1, gt=0, description="Largest initial step size.")
    dt_floor: float = Field(1e-4, gt=0, description="Initial step sizes are at least this.")
    inner_norms: bool = Field(False, description="RMSNorm on dt, B and C after x_proj (Jamba's Mamba layers).")
    norm_eps: float = Field(1e-6, gt=0, le=1.0, description="Epsilon of the inner norms.")
    inner_norm_weights: bool = Field(
        True, description="The inner norms learn a scale (Jamba's); false: weightless (FalconMamba's)."
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"state_size": 4},
        {"state_size": 2, "expand": 1, "conv_kernel": 2, "time_step_rank": 3, "bias": True, "conv_bias": False},
        {"state_size": 4, "inner_norms": True, "norm_eps": 1e-5},
        {"state_size": 4, "inner_norms": True, "inner_norm_weights": False},
    )

    def sizes(self, d_model: int) -> tuple[int, int, int, int]:
        """(I, S, R, K) in a model of width ``d_model``."""
        inner = self.intermediate_size if self.intermediate_size is not None else self.expand * d_model
        rank = self.time_step_rank if self.time_step_rank is not None else math.ceil(d_model / 16)
        return inner, self.state_size, rank, self.conv_kernel

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """A selective-scan mixer, not an attention: its inner width, state, convolution and step rank."""
        I, S, R, K = self.sizes(ctx.d_model)
        lines = [f"{ctx.d_model} → {I} inner, state {S}", f"conv {K}, Δ rank {R}"]
        skip = {"type", "state_size", "expand", "intermediate_size", "conv_kernel", "time_step_rank"}
        return Label("attention", f"Mamba selective-scan mixer · {self.type}", lines + wrap(options(self, skip)))

    def check(self, ctx: BuildContext) -> list[str]:
        problems = []
        if self.dt_min > self.dt_max:
            problems.append(f"dt_min ({self.dt_min}) must not exceed dt_max ({self.dt_max})")
        if not self.inner_norm_weights and not self.inner_norms:
            problems.append("inner_norm_weights: false describes the inner norms; set inner_norms: true, or remove it")
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        """in_proj E·2I, conv I·K, x_proj I·(R+2S), dt_proj R·I + I, A I·S, D I, out_proj I·E; a state of
        I·(K-1) convolution inputs and I·S SSM features per sequence (nothing cached per token)."""
        E = ctx.d_model
        I, S, R, K = self.sizes(E)
        matmul = E * 2 * I + I * (R + 2 * S) + R * I + I * E
        biases = (2 * I + E if self.bias else 0) + (I if self.conv_bias else 0) + I  # dt_proj's bias
        norms = R + 2 * S if self.inner_norms and self.inner_norm_weights else 0
        return Cost(
            params=matmul + I * K + biases + I * S + I + norms,
            matmul=matmul + I * K,
            state=I * (K - 1) + I * S,
            acts=E + 2 * I + 3 * I + (R + 2 * S) + 2 * I * S,
        )
