r"""LongT5's encoder attention: ``local`` (each token sees the keys within ``local_radius`` on either side) and
``transient_global`` (local, plus one global token per block of ``global_block_size`` tokens).

Local attention is computed in blocks of ``block_len = local_radius + 1`` (the sequence padded to a multiple of
it): the queries of a block score the keys of that block and of the two beside it, of which they see those at most
``local_radius`` away that are real tokens, so the work grows with the length, not its square::

    local_radius = 1 (block_len 2)     keys ->  0 1 2 3 4
                                      query 0   x x
                                      query 1   x x x
                                      query 2     x x x
                                      query 4         x x

Transient-global attention adds, to every query, keys and values of ``L // global_block_size`` global tokens: the
sum of the layer's (normed) input over each block of ``global_block_size`` real tokens (tokens past the last whole
block join it), normed by ``global_norm`` and projected by the layer's own key and value projections. Their score
bias is the stack's ``t5_global_relative`` table, by the distance in blocks from the query's block; with another
encoding they have none. The local scores take the stack's score bias (T5's buckets of ``key - query``) over the
window, as LongT5 computes it.

In a causal self-attention or a cross-attention (LongT5's decoder) both are plain multi-head attention, as
LongT5's decoder attends: one attention config serves an encoder-decoder, as LongT5's one
``encoder_attention_type`` does. Identical to transformers' ``LongT5LocalAttention`` and
``LongT5TransientGlobalAttention``, masked scores included (-1e10, so a padding query with no key in reach attends
evenly rather than to nothing).

Shapes: N batch, L length, E d_model, H heads, D head_dim, B blocks of K = block_len, G global tokens.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from zoo.components.kernels import Kernel, sdpa
from zoo.components.norm import RMSNorm
from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.label import SKIP_OPTIONS, Label, attention_label
from zoo.limits import MAX_HEAD_DIM, MAX_HEADS, MAX_POSITIONS
from zoo.tensor_parallel import refuse

from .base import _indivisible
from .gqa import GroupedQueryAttention

MASKED = -1e10
"""The score of a key a query may not see (LongT5's, not -inf: a query that sees no key stays finite)."""


def _blocks(t: torch.Tensor, block_len: int, dim: int) -> torch.Tensor:
    """``t`` padded with zeros along ``dim`` to a multiple of ``block_len`` and split there into (B, K)."""
    pad = -t.size(dim) % block_len
    if pad:
        widths = [0, 0] * (t.dim() - 1 - dim % t.dim()) + [0, pad]
        t = F.pad(t, widths)
    return t.unflatten(dim, (t.size(dim) // block_len, block_len))


def _three_blocks(t: torch.Tensor) -> torch.Tensor:
    """Blocks (..., B, K, X) -> each block with the one before and after it (..., B, 3K, X), zeros at the ends."""
    padded = F.pad(t, (0, 0, 0, 0, 1, 1))  # (..., B + 2, K, X)
    n = t.size(-3)
    return torch.cat([padded[..., i : i + n, :, :] for i in range(3)], dim=-2)


def global_blocks(tokens: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """LongT5's global block of each token and which global tokens exist, for real tokens ``tokens`` (N, L) bool.

    Returns ``(ids, exists)``: ``ids`` (N, L) long, the block of each real token (``index // block_size``, tokens
    past the last whole block of real tokens in that block), -1 for padding; ``exists`` (N, L // block_size) bool,
    the blocks up to the last one a real token is in (those before the first real token too, which sum to zero).
    Computed as transformers' ``_make_global_fixed_block_ids``, float steps
    included, so that a block size whose inverse is inexact splits as it does there."""
    mask = tokens.to(torch.float32)
    length = mask.size(1)
    step = torch.ones_like(mask) / block_size
    fixed = torch.cumsum(step, dim=1) - step
    sign = torch.where(mask != 0.0, 1.0, -1000.0)
    ids = torch.floor(sign + fixed - 1.0).clamp(min=-1.0)
    ids = ids * mask + (mask - 1)  # padding: -1
    ends = (torch.arange(length, device=mask.device) % block_size) == block_size - 1
    last = (ends & (ids >= 0)).sum(-1, keepdim=True).to(ids.dtype) - 1  # the last whole block of real tokens
    ids = torch.where(ids < last, ids, last)
    count = length // block_size
    exists = torch.arange(count, device=mask.device) <= ids.max(-1, keepdim=True).values  # (N, G)
    return ids.long(), exists


def _tokens_of(mask: torch.Tensor | None, n: int, length: int, device: torch.device) -> torch.Tensor:
    """The real tokens (N, L) of the model's padding mask (N|1, 1, 1, L), or every token without one."""
    if mask is None:
        return torch.ones(n, length, dtype=torch.bool, device=device)
    if mask.dim() != 4 or mask.size(-2) != 1 or mask.size(-1) != length:
        raise ValueError(
            f"local attention reads a padding mask of shape (N, 1, 1, {length}) (True on real tokens), got "
            f"{tuple(mask.shape)}; it attends bidirectionally, with no other mask"
        )
    return mask[:, 0, 0, :].expand(n, length)


class LocalAttention(GroupedQueryAttention):
    """LongT5's local attention (``global_block_size`` None) or transient-global attention in a bidirectional
    self-attention; plain multi-head attention when causal or cross (module docstring).

    Args:
        d_model: width E of the input and output.
        num_heads: heads H.
        head_dim: features per head D; None means ``d_model // num_heads``.
        local_radius: a token sees the keys at most this far on either side.
        global_block_size: tokens per global token; None: local attention only.
        global_norm_eps: eps of ``global_norm``, the RMS norm of the global tokens (transient-global only).
        bias: biases in the q, k, v, o projections (LongT5's: none).
        kernel: the kernel of the plain (causal, cross) attention; the local scores are computed here, per block.
        scale: score scale; None means ``1 / sqrt(D)`` (LongT5: 1.0).
        dropout: dropout on the attention weights, in training only.
    """

    def __init__(
        self,
        d_model: int,
        *,
        num_heads: int,
        head_dim: int | None = None,
        local_radius: int = 127,
        global_block_size: int | None = None,
        global_norm_eps: float = 1e-6,
        bias: bool = False,
        kernel: Kernel = sdpa,
        scale: float | None = None,
        dropout: float = 0.0,
        causal: bool = False,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            d_model,
            num_heads=num_heads,
            head_dim=head_dim,
            bias=bias,
            kernel=kernel,
            scale=scale,
            dropout=dropout,
            causal=causal,
            cross=cross,
            device=device,
            dtype=dtype,
        )
        if local_radius < 0:
            raise ValueError(f"local_radius ({local_radius}) must be >= 0")
        if global_block_size is not None and global_block_size < 1:
            raise ValueError(f"global_block_size ({global_block_size}) must be >= 1, or None for local attention")
        self.local = not (causal or cross)
        self.local_radius = local_radius
        self.block_len = local_radius + 1
        self.global_block_size = global_block_size if self.local else None
        self.global_norm = None
        if self.global_block_size is not None:
            self.global_norm = RMSNorm(d_model, eps=global_norm_eps, device=device, dtype=dtype)

    def forward(
        self,
        x: torch.Tensor,
        *,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        pos: Any = None,
        cache: Any = None,
    ) -> torch.Tensor:
        """``x`` (N, L, E) -> (N, L, E). Bidirectional: ``mask`` is the padding mask (N|1, 1, 1, L) or None, and
        positions are the sequence indices (as LongT5's); causal or cross, as ``GroupedQueryAttention``."""
        if not self.local:
            return super().forward(x, context=context, mask=mask, positions=positions, pos=pos, cache=cache)
        if cache is not None:
            raise ValueError("local attention is an encoder's: it keeps no decoding cache")
        n, L, _ = x.shape
        K, H, D = self.block_len, self.num_heads, self.head_dim
        tokens = _tokens_of(mask, n, L, x.device)  # (N, L)
        q = _blocks(self._heads(self.q_proj, x, H), K, 2)  # (N, H, B, K, D)
        if self.scale is None or self.scale != 1.0:  # LongT5 does not scale (1.0): its scores are left as they are
            q = q * (D**-0.5 if self.scale is None else self.scale)
        k = _three_blocks(_blocks(self._heads(self.k_proj, x, H), K, 2))  # (N, H, B, 3K, D)
        v = _three_blocks(_blocks(self._heads(self.v_proj, x, H), K, 2))
        key_index = torch.arange(3 * K, device=x.device)  # (3K,) a window's keys, K before the block's first
        query_index = key_index[K : 2 * K]  # (K,)
        near = (key_index[None, :] - query_index[:, None]).abs() < K  # (K, 3K): at most local_radius away
        real = _blocks(tokens, K, 1)  # (N, B, K)
        seen = real[..., :, None] & _three_blocks(real[..., None])[..., 0][..., None, :] & near  # (N, B, K, 3K)
        scores = (q @ k.transpose(-1, -2)).float()  # (N, H, B, K, 3K); float32, so -1e10 stays finite
        bias = None if pos is None else pos.score_bias(query_index[None], key_index[None])
        if bias is not None:  # (1, H, K, 3K): the stack's bias of key - query, the same in every block
            scores = scores + bias[:, :, None]
        scores = scores.masked_fill(~seen[:, None], MASKED)
        values = [v]
        if self.global_block_size is not None:
            g_scores, g_values = self._global(x, q, tokens, pos)
            scores, values = torch.cat([scores, g_scores], dim=-1), [v, g_values]
        weights = torch.softmax(scores, dim=-1).to(v.dtype)
        weights = F.dropout(weights, p=self.dropout, training=self.training)
        y = weights[..., : 3 * K] @ v  # (N, H, B, K, D)
        if len(values) > 1:
            y = y + weights[..., 3 * K :] @ values[1]
        y = y.flatten(2, 3)[:, :, :L]  # (N, H, L, D)
        return self.o_proj(y.transpose(1, 2).reshape(n, L, H * D))

    def _global(
        self, x: torch.Tensor, q: torch.Tensor, tokens: torch.Tensor, pos: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The scores (N, H, B, K, G) of the blocked queries ``q`` against the global tokens, masked and biased,
        and the global tokens' values (N, H, 1, G, D)."""
        n, L, _ = x.shape
        ids, exists = global_blocks(tokens, self.global_block_size)  # (N, L), (N, G)
        count = exists.size(1)
        member = F.one_hot(torch.where(ids >= 0, ids, count), count + 1)[..., :count].to(x.dtype)  # (N, L, G)
        aggregates = self.global_norm(member.transpose(1, 2) @ x)  # (N, G, E): each block's sum, normed
        k = self._heads(self.k_proj, aggregates, self.num_heads)[:, :, None]  # (N, H, 1, G, D)
        v = self._heads(self.v_proj, aggregates, self.num_heads)[:, :, None]
        scores = (q @ k.transpose(-1, -2)).float()  # (N, H, B, K, G)
        bias = torch.where(tokens[:, :, None] == exists[:, None, :], 0.0, MASKED)[:, None]  # (N, 1, L, G)
        if pos is not None and hasattr(pos, "global_bias"):
            distance = torch.arange(count, device=x.device)[None, None, :] - ids[..., None]  # (N, L, G)
            bias = bias + pos.global_bias(distance)  # (N, H, L, G)
        return scores + _blocks(bias.float(), self.block_len, 2), v

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism: the heads split as ``GroupedQueryAttention``'s; the global tokens' norm, which every
        rank's heads read, has no plan."""
        if self.global_norm is not None:
            refuse(f"transient-global attention of {self.num_heads} heads", "the global tokens' norm", mesh.size())
        super().shard_tensor(mesh)

    def extra_repr(self) -> str:
        extra = "" if self.global_block_size is None else f", global_block_size={self.global_block_size}"
        return super().extra_repr() + (f", local_radius={self.local_radius}{extra}" if self.local else "")


class LocalConfig(ComponentConfig):
    """LongT5's local attention (``zoo.components.attention.local``)."""

    type: Literal["local"] = "local"
    positional_styles: ClassVar[frozenset[str]] = frozenset({"embed", "bias", "none"})
    encoder_pattern: ClassVar[bool] = True
    """Its pattern applies in bidirectional self-attention only: a model without an encoder stack refuses it."""

    num_heads: int = Field(ge=1, le=MAX_HEADS, description="Heads.")
    head_dim: int | None = Field(
        None, ge=1, le=MAX_HEAD_DIM, description="Features per head; default d_model // num_heads."
    )
    local_radius: int = Field(
        127,
        ge=0,
        le=MAX_POSITIONS,
        description="A token sees the keys at most this far on either side (LongT5: 127); computed in blocks of "
        "local_radius + 1. Bidirectional self-attention only: causal and cross-attention see every key.",
    )
    bias: bool = Field(False, description="Biases in the q, k, v, o projections (LongT5's: none).")
    scale: float | None = Field(None, gt=0, description="Score scale; default 1/sqrt(head_dim) (LongT5: 1.0).")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the attention weights (training).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_heads": 4, "local_radius": 2},
        {"num_heads": 2, "head_dim": 6, "local_radius": 0, "bias": True, "scale": 1.0},
        {"num_heads": 4, "local_radius": 20},
    )

    def head_dim_for(self, d_model: int) -> int:
        """The head width this config gives in a model of width ``d_model``."""
        return self.head_dim if self.head_dim is not None else d_model // self.num_heads

    @property
    def num_kv_heads(self) -> int:
        return self.num_heads

    def biases(self) -> dict[str, bool]:
        """Whether each of the q, k, v, o projections has a bias: all or none."""
        return dict.fromkeys("qkvo", self.bias)

    def check(self, ctx: BuildContext) -> list[str]:
        if self.head_dim is None and ctx.d_model % self.num_heads:
            return [_indivisible(ctx.d_model, self.num_heads, "num_heads")]
        return []

    def cost(self, ctx: BuildContext) -> Cost:
        # q, k, v, o: 4·E·H·D (+ biases). Bidirectional, each query scores the 3·(local_radius + 1) keys of its
        # block and the two beside it (the window).
        E, H, D = ctx.d_model, self.num_heads, self.head_dim_for(ctx.d_model)
        weights = 4 * E * H * D
        local = not (ctx.causal or ctx.cross)
        return Cost(
            params=weights + (3 * H * D + E if self.bias else 0),
            matmul=weights,
            score_width=H * D,
            kv_width=H * D,
            window=3 * (self.local_radius + 1) if local else None,
            acts=E + 4 * H * D,
        )

    def _words(self, ctx: BuildContext) -> str | None:
        if ctx.causal or ctx.cross:
            return "plain multi-head attention, every key (as LongT5's decoder)"
        return f"local: keys within {self.local_radius} on either side, in blocks of {self.local_radius + 1}"

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Its heads and window (a causal or cross-attention sees every key); the stack's bias (``note``)."""
        words = self._words(ctx)
        shown = "; ".join(w for w in (words, note) if w) or None
        skip = SKIP_OPTIONS | {"local_radius", "global_block_size", "global_norm_eps", "bias"}
        return attention_label(self, ctx, note=shown, heads=self.num_heads, skip=skip)


class TransientGlobalConfig(LocalConfig):
    """LongT5's transient-global attention: local attention plus global tokens (``zoo.components.attention.local``)."""

    type: Literal["transient_global"] = "transient_global"

    global_block_size: int = Field(
        16,
        ge=1,
        le=MAX_POSITIONS,
        description="Tokens summed into each global token (LongT5: 16); every query also sees the L // "
        "global_block_size global tokens, their bias the stack's t5_global_relative table.",
    )
    global_norm_eps: float = Field(1e-6, gt=0, description="Eps of the RMS norm of the global tokens.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_heads": 4, "local_radius": 2, "global_block_size": 3},
        {"num_heads": 2, "head_dim": 6, "local_radius": 1, "global_block_size": 2, "scale": 1.0},
        {"num_heads": 4, "local_radius": 3, "global_block_size": 16},
    )

    def cost(self, ctx: BuildContext) -> Cost:
        # Local attention's, plus the global tokens' RMS norm (E) in a bidirectional stack. Their projections and
        # scores (L / global_block_size tokens) grow with the length; left out of the per-token figures.
        cost = super().cost(ctx)
        return cost if ctx.causal or ctx.cross else cost.with_(params=cost.params + ctx.d_model)

    def _words(self, ctx: BuildContext) -> str | None:
        words = super()._words(ctx)
        if ctx.causal or ctx.cross:
            return words
        biased = "" if ctx.positional == "t5_global_relative" else " (no bias)"
        return f"{words}; global tokens: sums of {self.global_block_size} tokens{biased}"
