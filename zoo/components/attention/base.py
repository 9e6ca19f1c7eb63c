"""What every softmax attention shares: keys and values from ``x`` or an encoder's ``context``, positions, the
decoding cache, the key-mask seam (windows, block-sparse patterns, chunks), what happens to the queries and keys
on the way (a clamp, norms before or after the rotation, a temperature per query) and the kernel that attends.

Shapes: N batch, L query length, S key length, E d_model, H query heads, Hkv key/value heads, D head_dim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from zoo.cache import CrossKVCache, KVCache, RollingKVCache
from zoo.components.kernels import Kernel, sdpa

from .masks import KeyMask


def _indivisible(d_model: int, heads: int, name: str) -> str:
    return f"d_model ({d_model}) must be divisible by {name} ({heads}), or set head_dim"


def _resolve_head_dim(d_model: int, heads: int, head_dim: int | None, name: str) -> int:
    if head_dim is not None:
        return head_dim
    if d_model % heads:
        raise ValueError(_indivisible(d_model, heads, name))
    return d_model // heads


@dataclass(frozen=True)
class ProjectionBiases:
    """The projections seam: which of the q, k, v and o projections learn a bias (Qwen2: q, k, v but not o)."""

    q: bool = True
    k: bool = True
    v: bool = True
    o: bool = True


@dataclass(frozen=True)
class QKNorm:
    """The q/k norm seam: ``build(width)`` makes the queries' norm and the keys', applied before positions rotate
    them, over each head's ``head_dim`` features (``scope="head"``: Qwen3) or a projection's (OLMo 2); with
    ``after_rope``, to each head once rotated (Llama 4, HunYuan; per head only)."""

    build: Callable[[int], nn.Module]
    scope: Literal["head", "projection"] = "head"
    after_rope: bool = False


@dataclass(frozen=True)
class LayerPositions:
    """The positions seam: encodings of this layer's own, each replacing the stack's ``pos``: a rotary encoding
    (Gemma 3's local layers) and a score bias (UMT5's buckets in every layer); ``build()`` makes each."""

    rotary: Callable[[], nn.Module] | None = None
    score_bias: Callable[[], nn.Module] | None = None


@dataclass(frozen=True)
class QueryTemperature:
    """Llama 4's attention temperature tuning (its NoPE layers): the query at sequence index ``i`` is multiplied by
    ``1 + scale * log1p(floor((i + 1) / floor_scale))`` (computed in float32), so scores sharpen as the context
    grows. Sequence indices, not positions: left padding counts, as transformers counts the tokens seen so far."""

    floor_scale: int
    scale: float

    def __call__(self, q: torch.Tensor, query_index: torch.Tensor) -> torch.Tensor:
        """``q`` (N, H, L, D) scaled by the temperature of each of its ``query_index`` (L,)."""
        factor = torch.log1p(torch.floor((query_index.float() + 1.0) / self.floor_scale)) * self.scale + 1.0
        return (q * factor[:, None]).to(q.dtype)


class _Attention(nn.Module):
    """What every variant shares: K/V from ``x`` or ``context``, positions, caches, the key-mask seam."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    k_proj: nn.Linear
    v_proj: nn.Linear

    def __init__(
        self,
        *,
        kernel: Kernel = sdpa,
        scale: float | None = None,
        softcap: float | None = None,
        dropout: float = 0.0,
        key_mask: KeyMask | None = None,
        causal: bool = False,
        cross: bool = False,
    ) -> None:
        super().__init__()
        # The kernel seam: what computes softmax(q·k) v (zoo.components.kernels, swapped by zoo.use_kernel).
        self.kernel = kernel
        self.scale = scale
        self.softcap = softcap
        self.dropout = dropout
        self.cross = cross
        self.causal = causal and not cross  # cross-attention always sees the whole encoder output
        # The mask seam: the keys a query sees (cross-attention: the whole encoder output), and the cache it sizes.
        self.pattern = None if cross else key_mask
        self.window = None if self.pattern is None else self.pattern.window
        self.q_norm: nn.Module | None = None  # query/key norms, where a variant has them
        self.k_norm: nn.Module | None = None
        self.qk_norm_scope = "head"
        self.qk_norm_after_rope = False  # Llama 4, HunYuan: the norms apply to the rotated queries and keys
        self.clip_qkv: float | None = None  # DBRX clamps the q, k and v projections to [-clip_qkv, clip_qkv]
        self.temperature: QueryTemperature | None = None  # Llama 4's NoPE layers scale each query by its index
        self.rotary: nn.Module | None = None  # this layer's own rotary encoding, instead of the stack's
        self.position_bias: nn.Module | None = None  # this layer's own score bias, instead of the stack's (UMT5)
        # Only a pattern or a subclass that overrides key_mask pays for the index tensors a key mask needs.
        overridden = type(self).key_mask is not _Attention.key_mask
        self.masks_keys = (overridden or self.pattern is not None) and not cross

    def new_cache(self, batch_size: int, max_len: int) -> KVCache | RollingKVCache | CrossKVCache:
        """This layer's decoding cache: a rolling buffer of the window with one, else every position. (Buffers
        are sized from the first keys, so ``batch_size`` is not needed here; it is part of the interface every
        layer's ``new_cache`` shares.)"""
        if self.cross:
            return CrossKVCache()
        return KVCache(max_len) if self.window is None else RollingKVCache(self.window, max_len)

    def key_mask(self, query_index: torch.Tensor, key_index: torch.Tensor) -> torch.Tensor | None:
        """The keys each query may see beyond padding and causality: ``(L, S)`` bool, True = may attend.

        ``query_index`` (L,) and ``key_index`` (S,) are sequence indices (not positions: left padding does
        not shift them). The default is the attention's ``key_mask`` pattern (``masks.SlidingWindow``,
        ``masks.BlockSparse``), or every key without one. A subclass that overrides this (local/global layers)
        changes nothing else: causality is still applied on top, and decoding passes the indices of the keys
        its cache returns.
        """
        return None if self.pattern is None else self.pattern(query_index, key_index, self.causal)

    def _heads(self, proj: nn.Module, x: torch.Tensor, heads: int, norm: nn.Module | None = None) -> torch.Tensor:
        """``proj(x)`` split into heads, ``(N, S, E) -> (N, heads, S, D)``, normalised per head or as a whole."""
        n, s, _ = x.shape
        y = proj(x)  # (N, S, heads * D)
        if self.clip_qkv is not None:
            y = y.clamp(-self.clip_qkv, self.clip_qkv)  # DBRX
        if self.qk_norm_after_rope and not self.cross:
            norm = None  # applied in _keys_values, once the positions have rotated them
        if norm is not None and self.qk_norm_scope == "projection":
            y = norm(y)  # over all heads' features (OLMo 2)
        y = y.view(n, s, heads, self.head_dim)  # (N, S, heads, D)
        if norm is not None and self.qk_norm_scope == "head":
            y = norm(y)  # over each head's D features (Qwen3, Gemma 3)
        return y.transpose(1, 2)

    def _split_kv(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k = self._heads(self.k_proj, src, self.num_kv_heads, self.k_norm)  # (N, Hkv, S, D)
        v = self._heads(self.v_proj, src, self.num_kv_heads)  # (N, Hkv, S, D)
        return k, v

    def _keys_values(self, x, q, *, context, mask, positions, pos, cache):
        """``(q, k, v, mask, bias)``: q and new keys rotated by ``pos``, K/V cached, the mask of the keys
        returned (padding, the key mask, causality) and the score bias of ``pos``."""
        if self.cross:
            if context is None and cache is None:
                raise ValueError("cross-attention needs `context` (the encoder output)")
            # Encoder K/V carry no positions (as in T5 and BART) and, with a cache, are computed once.
            k, v = self._split_kv(context) if cache is None else cache.get(lambda: self._split_kv(context))
            return q, k, v, mask, None
        k, v = self._split_kv(x)  # (N, Hkv, L, D)
        L = x.size(1)
        query_index = None
        if positions is None or self.masks_keys or self.temperature is not None:
            start = 0 if cache is None else cache.length  # an int, or a static cache's 0-d tensor
            query_index = start + torch.arange(L, device=x.device)  # (L,) sequence indices of the queries
        if positions is None:
            positions = query_index[None]  # (1, L)
        key_positions, key_index = positions, None
        rotary = pos if self.rotary is None else self.rotary  # a layer's own rotary replaces the stack's
        if rotary is not None:
            q, k = rotary.rotate(q, k, positions)  # before caching: cached keys keep their own rotation
        if self.qk_norm_after_rope:  # per head, over (N, H, L, D)'s last dim
            q = q if self.q_norm is None else self.q_norm(q)
            k = k if self.k_norm is None else self.k_norm(k)
        if self.temperature is not None:
            q = self.temperature(q, query_index)
        if cache is not None:
            k, v = cache.update(k, v, positions)  # (N, Hkv, S, D), every key the cache returns
            key_positions = cache.positions  # (N, S)
            key_index = cache.index  # (S,) sequence indices, or None: keys 0 .. S-1 in order
            if key_index is not None and mask is not None:
                mask = mask.index_select(-1, key_index)  # the model's mask covers every key so far
            if getattr(cache, "static", False):
                mask = cache.keys_mask(mask, L)  # fixed buffers: the written keys, padding and causality
        if self.masks_keys:
            if key_index is None:
                key_index = torch.arange(k.size(2), device=x.device)
            if getattr(self.pattern, "by_position", False):  # chunks: over positions, (N|1, 1, L, S)
                local = self.pattern(positions, key_positions, self.causal)[:, None]
            else:
                local = self.key_mask(query_index, key_index)
            if local is not None:
                if self.causal:
                    local = local & (key_index[None, :] <= query_index[:, None])
                mask = local if mask is None else mask & local
        scorer = pos if self.position_bias is None else self.position_bias  # a layer's own bias replaces the stack's
        bias = None if scorer is None else scorer.score_bias(positions, key_positions)
        return q, k, v, mask, bias
