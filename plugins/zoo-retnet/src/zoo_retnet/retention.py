r"""Multi-scale retention (RetNet, Sun et al. 2023) as a token mixer of zoo's attention kind.

Retention is causal attention without the softmax, in which a key's weight decays with its distance::

    parallel (training)     Retention(X) = (Q K^T * D) V,    D[n, m] = gamma^(n - m) if n >= m else 0
    recurrent (decoding)    S_n = gamma * S_(n-1) + k_n^T v_n,    o_n = q_n S_n

The two forms compute the same function. The recurrent one keeps one (D, Dv) state per head however long
the sequence, so decoding memory is constant. A chunk of tokens after a state (a prompt prefilled into the
cache) uses both: the parallel form inside the chunk plus the decayed state from before it.

Each head h decays at its own rate, gamma_h = 1 - 2^(-5-h) (multi-scale). Queries and keys are rotated by
the stack's positional encoding (with ``rope`` this is RetNet's xPos rotation without its extrapolation
scale); each head's output is normalised on its own (GroupNorm) and gated by swish(X W_G)::

    MSR(X) = W_O (swish(X W_G) * GroupNorm_h(Retention_h(X)))

Shapes: N batch, L sequence (chunk) length, E d_model, H heads, D query/key head_dim, Dv value head width.
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
from zoo.label import Label, attention_label
from zoo.limits import MAX_HEAD_DIM, MAX_HEADS
from zoo.tensor_parallel import check_divides

__all__ = ["MultiScaleRetention", "RetentionConfig", "RetentionState", "retention", "retention_decays"]


def retention_decays(num_heads: int) -> list[float]:
    """The decay rate of each head: ``gamma_h = 1 - 2^(-5-h)``, from 0.969 up towards 1."""
    return [1.0 - 2.0 ** (-5 - h) for h in range(num_heads)]


def retention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_decay: torch.Tensor, state: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Retention of a chunk of ``L`` tokens, after ``state`` (the recurrent state of the tokens before it).

    Args:
        q, k: ``(N, H, L, D)`` queries and keys (already rotated and scaled).
        v: ``(N, H, L, Dv)`` values.
        log_decay: ``(H,)`` ``log(gamma_h)``.
        state: ``(N, H, D, Dv)`` state before the chunk, or None (nothing before it: the parallel form).

    Returns:
        ``(N, H, L, Dv)`` outputs, and the state after the chunk (None when ``state`` is None).
    """
    L = q.size(2)
    index = torch.arange(L, device=q.device)
    distance = index[:, None] - index[None, :]  # (L, L): n - m
    decay = torch.exp(distance.clamp(min=0) * log_decay[:, None, None]) * (distance >= 0)  # (H, L, L): D
    out = (q @ k.transpose(-2, -1) * decay.to(q.dtype)) @ v  # (N, H, L, Dv)
    if state is None:
        return out, None
    # Token n of the chunk sees the old state decayed n + 1 times; the new state decays each key L - 1 - m times.
    into = torch.exp((index + 1)[:, None] * log_decay[:, None, None]).to(q.dtype)  # (H, L, 1)
    out = out + into * (q @ state)  # (N, H, L, Dv)
    left = torch.exp((L - 1 - index)[:, None] * log_decay[:, None, None]).to(q.dtype)  # (H, L, 1)
    whole = torch.exp(L * log_decay)[:, None, None].to(q.dtype)  # (H, 1, 1)
    return out, whole * state + (k * left).transpose(-2, -1) @ v  # (N, H, D, Dv)


class RetentionState:
    """The decoding cache of one retention layer: a ``(N, H, D, Dv)`` state, the same size at every length."""

    def __init__(self) -> None:
        self.state: torch.Tensor | None = None
        self.length = 0
        """Tokens folded into the state so far (a Python int)."""

    def current(self, q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The state (zeros before the first token), allocated once from the shapes of ``q`` and ``v``."""
        if self.state is None:
            n, h, _, d = q.shape
            self.state = q.new_zeros(n, h, d, v.size(-1))
        return self.state

    def update(self, state: torch.Tensor, tokens: int) -> None:
        """Replace the state (in place: the memory stays the same) after ``tokens`` more tokens."""
        if self.state is None:
            self.state = state.clone()
        else:
            self.state.copy_(state)
        self.length += tokens

    def reset(self) -> None:
        """Back to the empty state; the buffer is kept for the next sequence."""
        self.length = 0
        if self.state is not None:
            self.state.zero_()

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these batch rows (sequences that stopped leave the batch)."""
        if self.state is not None:
            self.state = self.state.index_select(0, rows)

    @property
    def nbytes(self) -> int:
        """Bytes held by the state (0 before the first token); independent of ``length``."""
        return 0 if self.state is None else self.state.nbytes


class MultiScaleRetention(nn.Module):
    """Multi-scale retention (RetNet): causal attention without softmax whose weights decay with distance.

    Each head decays at its own rate; head outputs are group-normalised and swish-gated. It runs in the
    parallel form over a sequence and in the recurrent form (constant memory) when decoding with a cache.

    Padding: ``mask`` (True = may attend, as every zoo attention gets it) is read as a key-padding mask, the
    keys its last query may see. A padded key is zeroed, so it adds nothing to any output or to the state:
    right-padded batches leave the real positions unchanged, and left-padded prompts generate as if unpadded.
    Only positional encodings that rotate q/k (``rope``) or embed positions (``learned``, ``sinusoidal``)
    work with retention; a score bias (``alibi``, ``t5_relative``) has no recurrent form and is refused.

    Args:
        d_model: width E of the input and output.
        num_heads: heads H, each with its own decay.
        head_dim: query/key features per head D; None means ``d_model // num_heads``.
        value_factor: value (and gate) features per head are ``value_factor * head_dim`` (RetNet: 2).
        bias: learn biases in the projections.
        eps: epsilon of the per-head GroupNorm.
        causal, cross: what the stack asks for; retention is causal self-attention only.

    Raises:
        ValueError: not causal, cross-attention, or ``d_model`` not divisible by ``num_heads`` (no head_dim).
    """

    def __init__(
        self,
        d_model: int,
        *,
        num_heads: int,
        head_dim: int | None = None,
        value_factor: int = 2,
        bias: bool = False,
        eps: float = 1e-6,
        causal: bool = True,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if cross or not causal:
            raise ValueError(f"retention is causal self-attention only (got causal={causal}, cross={cross})")
        if head_dim is None and d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads}), or set head_dim")
        self.num_heads = num_heads
        self.head_dim = head_dim if head_dim is not None else d_model // num_heads
        self.value_dim = value_factor * self.head_dim
        self.scaling = self.head_dim**-0.5
        self.log_decay = [math.log(g) for g in retention_decays(num_heads)]
        factory = {"device": device, "dtype": dtype}
        qk, vg = num_heads * self.head_dim, num_heads * self.value_dim
        self.q_proj = nn.Linear(d_model, qk, bias=bias, **factory)
        self.k_proj = nn.Linear(d_model, qk, bias=bias, **factory)
        self.v_proj = nn.Linear(d_model, vg, bias=bias, **factory)
        self.g_proj = nn.Linear(d_model, vg, bias=bias, **factory)
        self.group_norm = nn.GroupNorm(num_heads, vg, eps=eps, **factory)
        self.o_proj = residual_output(nn.Linear(vg, d_model, bias=bias, **factory))

    def new_cache(self, batch_size: int, max_len: int) -> RetentionState:
        """The recurrent state (its size depends on neither ``max_len`` nor how many tokens are decoded)."""
        return RetentionState()

    def forward(
        self,
        x: torch.Tensor,
        *,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        pos: Any = None,
        cache: RetentionState | None = None,
    ) -> torch.Tensor:
        """``x`` (N, L, E) -> (N, L, E). ``mask`` (N|1, 1, L, S) bool, read for key padding only; ``positions``
        (N|1, L) rotate q/k through ``pos``; ``cache`` from :meth:`new_cache` (``context`` is not used)."""
        n, L, _ = x.shape
        H, D, Dv = self.num_heads, self.head_dim, self.value_dim
        q = self.q_proj(x).view(n, L, H, D).transpose(1, 2)  # (N, H, L, D)
        k = self.k_proj(x).view(n, L, H, D).transpose(1, 2) * self.scaling  # (N, H, L, D)
        v = self.v_proj(x).view(n, L, H, Dv).transpose(1, 2)  # (N, H, L, Dv)
        if positions is None:
            start = 0 if cache is None else cache.length
            positions = torch.arange(start, start + L, device=x.device)[None]  # (1, L)
        if pos is not None:
            if pos.score_bias(positions[:, :1], positions[:, :1]) is not None:
                raise ValueError("retention cannot add a score bias (alibi, t5_relative): use rope or none")
            q, k = pos.rotate(q, k, positions)
        if mask is not None:
            k = k.masked_fill(~mask[:, :, -1, -L:, None], 0.0)  # padded keys: nothing to retain
        log_decay = torch.tensor(self.log_decay, device=x.device)  # (H,)
        y, state = retention(q, k, v, log_decay, None if cache is None else cache.current(q, v))  # (N, H, L, Dv)
        if cache is not None:
            cache.update(state, L)
        y = self._group_norm(y.transpose(1, 2).reshape(n * L, H * Dv)).view(n, L, H * Dv)  # per-head norm
        return self.o_proj(F.silu(self.g_proj(x)) * y)  # (N, L, E)

    def _group_norm(self, y: torch.Tensor) -> torch.Tensor:
        """``group_norm`` over this module's heads (its own, once split over ranks: the weights' local part)."""
        norm = self.group_norm
        weight, bias = (t.to_local() if hasattr(t, "to_local") else t for t in (norm.weight, norm.bias))
        return F.group_norm(y, self.num_heads, weight, bias, norm.eps)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the heads split over the ranks, each with its own decay
        and its own channels of the group norm; q, k, v and the gate column-wise, o row-wise."""
        from torch.distributed.tensor import Shard, distribute_tensor
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        size, rank = mesh.size(), mesh.get_local_rank()
        check_divides(f"retention of {self.num_heads} heads", size, num_heads=self.num_heads)
        plan = {name: ColwiseParallel() for name in ("q_proj", "k_proj", "v_proj", "g_proj")}
        parallelize_module(self, mesh, {**plan, "o_proj": RowwiseParallel()})
        for name, param in list(self.group_norm.named_parameters()):
            split = nn.Parameter(distribute_tensor(param.data, mesh, [Shard(0)]), requires_grad=param.requires_grad)
            self.group_norm.register_parameter(name, split)
        self.num_heads //= size
        self.log_decay = self.log_decay[rank * self.num_heads : (rank + 1) * self.num_heads]

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}, value_dim={self.value_dim}"


class RetentionConfig(ComponentConfig):
    """Recipe options of ``retention``: RetNet's multi-scale retention (decoder stacks only)."""

    type: Literal["retention"] = "retention"
    requires_causal: ClassVar[bool] = True
    supports_cross: ClassVar[bool] = False  # causal self-attention only
    # A score bias (alibi, t5_relative) has no recurrent form: retention rotates (rope) or takes embedded positions.
    positional_styles: ClassVar[frozenset[str]] = frozenset({"none", "embed", "rotate"})
    num_heads: int = Field(ge=1, le=MAX_HEADS, description="Heads, each with its own decay 1 - 2^(-5-h).")
    head_dim: int | None = Field(
        None, ge=1, le=MAX_HEAD_DIM, description="Query/key features per head; default d_model // num_heads."
    )
    value_factor: int = Field(
        2, ge=1, le=MAX_HEADS, description="Value and gate features per head, as a multiple of head_dim."
    )
    bias: bool = Field(False, description="Learn biases in the projections.")
    eps: float = Field(1e-6, gt=0, description="Epsilon of the per-head GroupNorm.")

    def head_dim_for(self, d_model: int) -> int:
        """The query/key head width in a model of width ``d_model`` (what ``rope`` rotates)."""
        return self.head_dim if self.head_dim is not None else d_model // self.num_heads

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_heads": 4},
        {"num_heads": 2, "value_factor": 1, "bias": True},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        if self.head_dim is None and ctx.d_model % self.num_heads:
            return [f"d_model ({ctx.d_model}) must be divisible by num_heads ({self.num_heads}), or set head_dim"]
        return []

    def cost(self, ctx: BuildContext) -> Cost:
        """q, k (E·H·D each), v, g (E·H·Dv each), o (H·Dv·E), GroupNorm; a (H, D, Dv) state per sequence.

        The decoding state does not grow with the sequence, so nothing is cached per token.
        """
        E = ctx.d_model
        qk = self.num_heads * self.head_dim_for(E)
        vg = self.value_factor * qk
        weights = 2 * E * qk + 3 * E * vg
        biases = (2 * qk + 2 * vg + E) if self.bias else 0
        return Cost(
            params=weights + biases + 2 * vg,  # GroupNorm scale and shift
            matmul=weights,
            score_width=(qk + vg) // 2,  # q·k over D and decay-weighted sums of v over Dv
            state=qk * self.value_factor * self.head_dim_for(E),  # H · D · Dv
            acts=E + 2 * qk + 3 * vg,
        )

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Retention, not softmax attention: its heads, each with its own decay (the range shown), its widths."""
        box = attention_label(self, ctx, note=note, heads=self.num_heads, skip={"type", "num_heads", "value_factor"})
        decays = retention_decays(self.num_heads)
        width = self.head_dim_for(ctx.d_model)
        lines = [f"{self.num_heads} heads, q/k {width}, values {width * self.value_factor}"]
        lines.append(f"decays {decays[0]:.4g} to {decays[-1]:.4g}")
        return Label("attention", f"Multi-scale retention · {self.type}", lines + box.lines[1:])
