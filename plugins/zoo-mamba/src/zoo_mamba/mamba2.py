r"""Mamba-2's SSD mixer (Dao & Gu 2024) as a token mixer of zoo's attention kind.

One layer, for an input ``x`` (N, L, E), as transformers' ``Mamba2Mixer`` computes it::

    z, xBC, dt = split(in_proj(x))                 I, I + 2·G·S, H        (I = expand · E = H · P)
    u, B, C    = split(silu(causal_depthwise_conv(xBC)))                 B, C: G groups of S, shared by H / G heads
    delta      = softplus(dt + dt_bias)            (N, L, H): one step size per head
    h_t        = exp(delta_t A) h_(t-1) + delta_t u_t B_t^T             A = -exp(A_log): one scalar per head
    y_t        = h_t C_t + D u_t                   h: (N, H, P, S)
    out        = out_proj(RMSNorm_G(y * silu(z)))  the norm is taken over each of the G groups of I / G

With a scalar decay per head, the scan over a chunk is masked attention (the structured state-space duality):
:func:`ssd` splits a sequence into chunks of ``chunk_size``, computes each chunk's output in parallel as
``(C B^T * decay) u`` and carries the state between chunks. Decoding takes one step at a time from the fixed
state (the last K - 1 convolution inputs and ``h``). Both forms compute the same function, in float32.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.init import residual_output
from zoo.label import Label, options, wrap

from .common import SSMState, causal_conv, real_tokens

__all__ = ["Mamba2", "Mamba2Config", "segment_sum", "ssd", "ssd_step"]


def segment_sum(a: torch.Tensor) -> torch.Tensor:
    """``(..., T)`` -> ``(..., T, T)``: ``out[i, j] = a[j+1] + ... + a[i]`` for ``i >= j``, ``-inf`` above the
    diagonal; a masked cumulative sum, so no difference of large sums is taken."""
    T = a.size(-1)
    a = a[..., None].expand(*a.shape, T)  # [..., k, j] = a[k]
    below = torch.tril(torch.ones(T, T, dtype=torch.bool, device=a.device), diagonal=-1)
    sums = a.masked_fill(~below, 0).cumsum(dim=-2)
    on_or_below = torch.tril(torch.ones(T, T, dtype=torch.bool, device=a.device))
    return sums.masked_fill(~on_or_below, -math.inf)


def ssd(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    chunk_size: int,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The SSM over a sequence in chunks (the parallel form), after ``state``; float32 throughout.

    Args:
        u: (N, L, H, P) inputs. delta: (N, L, H) step sizes. A: (H,) negative decays.
        B, C: (N, L, H, S) (groups already repeated over their heads).
        chunk_size: T, the tokens computed together as masked attention.
        state: (N, H, P, S) state before the sequence, or None (zeros).

    Returns:
        y (N, L, H, P) without the D skip, and the state after the sequence (N, H, P, S).
    """
    n, L, H, P = u.shape
    T = chunk_size
    pad = (T - L % T) % T  # padded steps have delta = 0: no decay, no input, the state passes through
    x = F.pad(u.float() * delta[..., None], (0, 0, 0, 0, 0, pad)).view(n, -1, T, H, P)  # (N, c, T, H, P)
    a = F.pad(delta * A, (0, 0, 0, pad)).view(n, -1, T, H).permute(0, 3, 1, 2)  # (N, H, c, T)
    B = F.pad(B.float(), (0, 0, 0, 0, 0, pad)).view(n, -1, T, H, B.size(-1))  # (N, c, T, H, S)
    C = F.pad(C.float(), (0, 0, 0, 0, 0, pad)).view(n, -1, T, H, C.size(-1))
    cum = a.cumsum(dim=-1)  # (N, H, c, T)
    # 1. Inside each chunk: attention-like scores C_l . B_s, weighted by the decay from s to l.
    decay = torch.exp(segment_sum(a))  # (N, H, c, T, T)
    y = torch.einsum("nclhs,ncmhs,nhclm,ncmhp->nclhp", C, B, decay, x)
    # 2. Each chunk's own contribution to the state at its end.
    to_end = torch.exp(cum[..., -1:] - cum)  # (N, H, c, T)
    chunk_states = torch.einsum("nclhs,nhcl,nclhp->nchps", B, to_end, x)  # (N, c, H, P, S)
    # 3. The state at each chunk boundary: the states before, each decayed over the chunks between.
    first = torch.zeros_like(chunk_states[:, :1]) if state is None else state[:, None].float()
    chunk_states = torch.cat([first, chunk_states], dim=1)  # (N, c + 1, H, P, S)
    across = torch.exp(segment_sum(F.pad(cum[..., -1], (1, 0))))  # (N, H, c + 1, c + 1)
    boundary = torch.einsum("nhzc,nchps->nzhps", across, chunk_states)  # (N, c + 1, H, P, S)
    # 4. What the state entering each chunk adds to its outputs.
    y = y + torch.einsum("nclhs,nchps,nhcl->nclhp", C, boundary[:, :-1], torch.exp(cum))
    return y.reshape(n, -1, H, P)[:, :L], boundary[:, -1]


def ssd_step(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrent form, one token at a time over the L tokens given: the same arguments and results as
    :func:`ssd` (this is the decoding step, and the reference the parallel form is tested against)."""
    n, L, H, P = u.shape
    h = u.new_zeros(n, H, P, B.size(-1), dtype=torch.float32) if state is None else state.float()
    ys = []
    for t in range(L):
        dA = torch.exp(delta[:, t] * A)  # (N, H)
        h = dA[..., None, None] * h + (delta[:, t, :, None] * u[:, t].float())[..., None] * B[:, t, :, None].float()
        ys.append(torch.einsum("nhps,nhs->nhp", h, C[:, t].float()))
    return torch.stack(ys, dim=1), h


class GatedRMSNorm(nn.Module):
    """Mamba-2's norm of ``y * silu(z)``, RMS-normalised over each of ``groups`` groups of features, scaled."""

    def __init__(self, width: int, groups: int, eps: float, device=None, dtype=None) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width, device=device, dtype=dtype))
        self.groups, self.eps = groups, eps

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        y = y.float() * F.silu(z.float())
        g = y.view(*y.shape[:-1], self.groups, -1)
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * g.view_as(y).to(self.weight.dtype)

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)


class Mamba2(nn.Module):
    """Mamba-2's SSD mixer: multi-head selective SSM with a scalar decay per head, grouped B and C, a gated
    RMSNorm; chunked (parallel) over a sequence, recurrent when decoding from its fixed-size state.

    Padding is handled as in :class:`zoo_mamba.Mamba` (padded inputs zeroed before in_proj and after the
    convolution); positions are not used.

    Args:
        d_model: width E. head_dim: P. expand: I = expand * E = H * P, so H = I / P heads.
        num_groups: G groups of B and C, each shared by H / G heads. state_size: S.
        conv_kernel: K. chunk_size: tokens computed together in the parallel form.
        bias: biases in in_proj and out_proj. conv_bias: a bias in the convolution.
        norm_eps: epsilon of the gated RMSNorm.
        dt_min, dt_max, dt_floor: the range of the initial step sizes.
        init_std, num_layers: the recipe's init (out_proj scaled by 1/sqrt(2 * num_layers)).
    """

    def __init__(
        self,
        d_model: int,
        *,
        head_dim: int = 64,
        expand: int = 2,
        num_groups: int = 1,
        state_size: int = 128,
        conv_kernel: int = 4,
        chunk_size: int = 256,
        bias: bool = False,
        conv_bias: bool = True,
        norm_eps: float = 1e-5,
        dt_min: float = 0.001,
        dt_max: float = 0.1,
        dt_floor: float = 1e-4,
        init_std: float = 0.02,
        num_layers: int = 1,
        causal: bool = True,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if cross or not causal:
            raise ValueError(f"mamba2 is a causal self-mixer only (got causal={causal}, cross={cross})")
        self.inner = expand * d_model
        if self.inner % head_dim or (self.inner // head_dim) % num_groups:
            raise ValueError(
                f"mamba2: expand * d_model ({self.inner}) must be a multiple of head_dim ({head_dim}) and the "
                f"heads a multiple of num_groups ({num_groups})"
            )
        self.num_heads, self.head_dim, self.num_groups = self.inner // head_dim, head_dim, num_groups
        self.state_size, self.chunk_size = state_size, chunk_size
        self.dt_range = (dt_min, dt_max, dt_floor)
        self.init_std, self.num_layers = init_std, num_layers
        factory = {"device": device, "dtype": dtype}
        I, H, GS = self.inner, self.num_heads, num_groups * state_size
        self.conv_dim = I + 2 * GS
        self.in_proj = nn.Linear(d_model, I + self.conv_dim + H, bias=bias, **factory)
        self.conv1d = nn.Conv1d(
            self.conv_dim, self.conv_dim, conv_kernel, groups=self.conv_dim, bias=conv_bias, **factory
        )
        self.dt_bias = nn.Parameter(torch.empty(H, **factory))
        self.A_log = nn.Parameter(torch.empty(H, **factory))
        self.D = nn.Parameter(torch.empty(H, **factory))
        self.norm = GatedRMSNorm(I, num_groups, norm_eps, **factory)
        self.out_proj = residual_output(nn.Linear(I, d_model, bias=bias, **factory))
        if self.A_log.device.type != "meta":
            self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Mamba-2's init: A_h = -h (h = 1..H), D = 1, step sizes log-uniform in [dt_min, dt_max]."""
        for linear in (self.in_proj, self.out_proj):
            std = self.init_std / math.sqrt(2 * self.num_layers) if linear is self.out_proj else self.init_std
            nn.init.normal_(linear.weight, std=std)
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)
        self.conv1d.reset_parameters()
        lo, hi, floor = self.dt_range
        dt = torch.exp(torch.rand_like(self.D, dtype=torch.float32) * (math.log(hi) - math.log(lo)) + math.log(lo))
        dt = dt.clamp(min=floor)
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
        self.A_log.copy_(torch.log(torch.arange(1, self.num_heads + 1, dtype=torch.float32)))
        nn.init.ones_(self.D)
        self.norm.reset_parameters()

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
        """``x`` (N, L, E) -> (N, L, E); the arguments are those of :meth:`zoo_mamba.Mamba.forward`."""
        n, L, _ = x.shape
        I, H, P, G, S = self.inner, self.num_heads, self.head_dim, self.num_groups, self.state_size
        real = real_tokens(mask, L)
        if real is not None:
            x = x * real.to(x.dtype)
        z, xBC, dt = self.in_proj(x).split([I, self.conv_dim, H], dim=-1)
        xBC, conv_state = causal_conv(xBC, self.conv1d.weight, self.conv1d.bias, None if cache is None else cache.conv)
        xBC = F.silu(xBC)
        if real is not None:
            xBC = xBC * real.to(xBC.dtype)
        u, B, C = xBC.split([I, G * S, G * S], dim=-1)
        u = u.reshape(n, L, H, P)
        B = B.reshape(n, L, G, S).repeat_interleave(H // G, dim=2)  # (N, L, H, S): head h uses group h // (H / G)
        C = C.reshape(n, L, G, S).repeat_interleave(H // G, dim=2)
        delta = F.softplus(dt.float() + self.dt_bias.float())  # (N, L, H)
        A = -torch.exp(self.A_log.float())  # (H,)
        state = None if cache is None else cache.ssm
        if cache is not None and L == 1:
            y, state = ssd_step(u, delta, A, B, C, state)
        else:
            y, state = ssd(u, delta, A, B, C, self.chunk_size, state)
        if cache is not None:
            cache.update(conv_state, state, L)
        y = y + self.D.float()[:, None] * u.float()  # (N, L, H, P)
        y = self.norm(y.reshape(n, L, I), z)
        return self.out_proj(y.to(x.dtype))  # (N, L, E)

    def extra_repr(self) -> str:
        return (
            f"heads={self.num_heads}, head_dim={self.head_dim}, groups={self.num_groups}, "
            f"state_size={self.state_size}, chunk_size={self.chunk_size}"
        )


class Mamba2Config(ComponentConfig):
    """Recipe options of ``mamba2``: Mamba-2's SSD mixer (decoder stacks only, ``positional: none``)."""

    type: Literal["mamba2"] = "mamba2"
    requires_causal: ClassVar[bool] = True
    supports_cross: ClassVar[bool] = False
    positional_styles: ClassVar[frozenset[str]] = frozenset({"none", "embed"})
    head_dim: int = Field(64, ge=1, le=4096, description="P: features per head (H = expand * d_model / P).")
    expand: int = Field(2, ge=1, le=16, description="Inner width I = expand * d_model.")
    num_groups: int = Field(1, ge=1, le=1024, description="G groups of B and C, each shared by H / G heads.")
    state_size: int = Field(128, ge=1, le=1024, description="S: state features per head and head feature.")
    conv_kernel: int = Field(4, ge=1, le=64, description="K: width of the causal depthwise convolution.")
    chunk_size: int = Field(256, ge=1, le=1 << 16, description="Tokens computed together by the parallel form.")
    bias: bool = Field(False, description="Biases in in_proj and out_proj.")
    conv_bias: bool = Field(True, description="A bias in the convolution.")
    norm_eps: float = Field(1e-5, gt=0, description="Epsilon of the gated RMSNorm.")
    dt_min: float = Field(0.001, gt=0, description="Smallest initial step size.")
    dt_max: float = Field(0.1, gt=0, description="Largest initial step size.")
    dt_floor: float = Field(1e-4, gt=0, description="Initial step sizes are at least this.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"head_dim": 16, "state_size": 8, "chunk_size": 4},
        {"head_dim": 8, "num_groups": 2, "state_size": 4, "conv_kernel": 2, "chunk_size": 3, "bias": True},
    )

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """An SSD mixer, not an attention: its heads and their width, inner width, state, groups, convolution."""
        inner = self.expand * ctx.d_model
        groups = f"{self.num_groups} group" + ("s" if self.num_groups > 1 else "")
        lines = [
            f"{inner // self.head_dim} heads, head_dim {self.head_dim}",
            f"{ctx.d_model} → {inner} inner, state {self.state_size}",
            f"{groups} of B, C; conv {self.conv_kernel}",
        ]
        skip = {"type", "head_dim", "expand", "num_groups", "state_size", "conv_kernel"}
        return Label("attention", f"Mamba-2 SSD mixer · {self.type}", lines + wrap(options(self, skip)))

    def check(self, ctx: BuildContext) -> list[str]:
        inner = self.expand * ctx.d_model
        if inner % self.head_dim:
            return [f"expand * d_model ({inner}) must be a multiple of head_dim ({self.head_dim})"]
        if (inner // self.head_dim) % self.num_groups:
            return [f"the {inner // self.head_dim} heads must be a multiple of num_groups ({self.num_groups})"]
        if self.dt_min > self.dt_max:
            return [f"dt_min ({self.dt_min}) must not exceed dt_max ({self.dt_max})"]
        return []

    def cost(self, ctx: BuildContext) -> Cost:
        """in_proj E·(2I + 2GS + H), conv (I + 2GS)·K, dt_bias, A, D (H each), norm I, out_proj I·E; a state of
        (I + 2GS)·(K-1) convolution inputs and H·P·S SSM features per sequence (nothing cached per token)."""
        E = ctx.d_model
        I = self.expand * E
        H, GS, K = I // self.head_dim, self.num_groups * self.state_size, self.conv_kernel
        conv_dim = I + 2 * GS
        matmul = E * (I + conv_dim + H) + I * E
        biases = (I + conv_dim + H + E if self.bias else 0) + (conv_dim if self.conv_bias else 0)
        return Cost(
            params=matmul + conv_dim * K + biases + 3 * H + I,
            matmul=matmul + conv_dim * K,
            state=conv_dim * (K - 1) + I * self.state_size,
            acts=E + 2 * (I + conv_dim + H) + 3 * I,
        )
