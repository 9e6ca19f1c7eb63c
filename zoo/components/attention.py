r"""Attention: multi-head, grouped-query, multi-query, and a mixture of attention heads.

Every variant computes attention with one function, :func:`attend`, a thin layer over
``F.scaled_dot_product_attention``. MHA, GQA and MQA are one implementation (``GroupedQueryAttention``)
that differ only in how many key/value heads serve the query heads::

    MHA (Hkv = H)          GQA (1 < Hkv < H)        MQA (Hkv = 1)
    q   q   q   q          q   q   q   q            q   q   q   q
    |   |   |   |          \   /   \   /             \   \ /   /
    kv  kv  kv  kv          kv      kv                    kv

A ``window`` (sliding-window attention: Mistral, Qwen2, Starcoder2) lets each query see only the
``window`` most recent keys, itself included, and decodes with a rolling cache of the window::

    window = 3, causal         keys ->  0 1 2 3 4 5
                              query 0   x
                              query 1   x x
                              query 2   x x x
                              query 3     x x x
                              query 4       x x x
                              query 5         x x x

Shapes: N batch, L query length, S key length, E d_model, H query heads, Hkv key/value heads,
D head_dim, X num_experts, K top_k, W window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Annotated, Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from zoo.cache import CrossKVCache, KVCache, RollingKVCache
from zoo.config import BuildContext, ComponentConfig, Spec
from zoo.cost import Cost, nested_cost
from zoo.hookspecs import hookimpl
from zoo.init import residual_output
from zoo.recipe.limits import MAX_EXPERTS, MAX_HEAD_DIM, MAX_HEADS
from zoo.registry import preset

__all__ = [
    "attend",
    "causal_mask",
    "sliding_window_mask",
    "MultiHeadAttention",
    "GroupedQueryAttention",
    "MultiQueryAttention",
    "MixtureOfAttentionHeads",
    "AttentionConfig",
    "MHAConfig",
    "GQAConfig",
    "MQAConfig",
    "MoAConfig",
]


def causal_mask(query_len: int, key_len: int, device: torch.device | None = None) -> torch.Tensor:
    """``(L, S)`` boolean mask, True where a query may see a key; the last query sees every key."""
    return torch.ones(query_len, key_len, dtype=torch.bool, device=device).tril(key_len - query_len)


def sliding_window_mask(
    query_index: torch.Tensor, key_index: torch.Tensor, window: int, lookahead: int = 0
) -> torch.Tensor:
    """``(L, S)`` bool, True where the query at sequence index ``q`` may see the key at index ``k``:
    ``k`` is at most ``window - 1`` before ``q`` and at most ``lookahead`` after it (0: causal).

    Causal, this is Hugging Face's ``sliding_window_overlay`` (``kv_idx > q_idx - sliding_window``), the
    same for Mistral, Mixtral, Qwen2/3, Starcoder2, Gemma 2/3 and Phi-3 in transformers 5.
    """
    distance = query_index[:, None] - key_index[None, :]  # (L, S)
    return (distance < window) & (distance >= -lookahead)


def random_block_choice(num_blocks: int, random_blocks: int, seed: int, device=None) -> torch.Tensor:
    """BigBird's random blocks: for each of ``num_blocks`` query blocks, the ``random_blocks`` key blocks it sees
    besides its window and the two global blocks, ``(num_blocks, random_blocks)`` long, -1 where fewer remain.

    The choice is a fixed function of (query block, key block, ``seed``) made of tensor operations (a hash ranks
    the eligible blocks), so every forward of a model sees the same blocks and nothing leaves the graph. The
    global blocks (first and last) choose none: they see every key.
    """
    rows = torch.arange(num_blocks, device=device)[:, None]
    cols = torch.arange(num_blocks, device=device)[None, :]
    mixed = (rows * 1_000_003 + cols * 7_919 + (seed + 1) * 104_729) * 2_654_435_761 % 4_294_967_296
    eligible = ((rows - cols).abs() > 1) & (cols > 0) & (cols < num_blocks - 1)
    eligible &= (rows > 0) & (rows < num_blocks - 1)
    rank = torch.where(eligible, mixed.double(), -1.0)  # (n, n): eligible key blocks ranked by their hash
    k = min(random_blocks, num_blocks)
    score, chosen = rank.topk(k, dim=-1)  # (n, k)
    return torch.where(score >= 0, chosen, -1)


def block_sparse_mask(
    query_index: torch.Tensor, key_index: torch.Tensor, block_size: int, random_blocks: int, seed: int = 0
) -> torch.Tensor | None:
    """``(L, S)`` bool of BigBird's block-sparse attention over ``block_size``-token blocks: a query sees its own
    block and the two beside it, the first and the last block (global: they also see every key), and the
    ``random_blocks`` blocks of :func:`random_block_choice`. None (every key) for sequences of at most
    ``(5 + 2 * random_blocks) * block_size`` keys, which transformers' BigBird attends fully too."""
    length = key_index.numel()
    if length <= (5 + 2 * random_blocks) * block_size:
        return None
    num_blocks = -(-length // block_size)
    q, k = query_index // block_size, key_index // block_size  # (L,), (S,) block of each index
    near = (q[:, None] - k[None, :]).abs() <= 1
    glob = ((q == 0) | (q == num_blocks - 1))[:, None] | ((k == 0) | (k == num_blocks - 1))[None, :]
    chosen = random_block_choice(num_blocks, random_blocks, seed, device=key_index.device)[q]  # (L, r)
    picked = (chosen[:, :, None] == k[None, None, :]).any(1)  # (L, S)
    return near | glob | picked


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    softcap: float | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Scaled dot-product attention of ``q`` over ``k``/``v``; the one kernel every variant uses.

    Args:
        q: ``(N, H, L, D)`` queries.
        k: ``(N, Hkv, S, D)`` keys; ``H`` must be a multiple of ``Hkv``. Each K/V head serves
            ``H // Hkv`` consecutive query heads without being repeated in memory.
        v: ``(N, Hkv, S, D)`` values.
        mask: boolean, True = may attend, broadcastable to ``(N, H, L, S)``. Used exactly as given.
        bias: float score bias broadcastable to ``(N, H, L, S)`` (ALiBi, T5 buckets), added before softmax.
        causal: with no ``mask``, query ``i`` sees keys up to ``S - L + i`` (so cached decoding works).
        scale: score scale; None means ``1 / sqrt(D)``.
        softcap: scores become ``softcap * tanh(scores / softcap)`` before bias and mask (Gemma 2); this
            path computes the scores explicitly (no fused kernel takes a cap).
        dropout_p: dropout on the attention weights; pass 0.0 outside training.

    Returns:
        ``(N, H, L, D)``. A query row with nothing to attend gives zeros, never NaN.
    """
    query_len, key_len = q.size(-2), k.size(-2)
    if causal and mask is None and query_len == 1:
        causal = False  # one query, the newest position: every key is visible (a decoding step)
    if causal and mask is None and (bias is not None or query_len != key_len):
        # SDPA's is_causal aligns the diagonal top-left and takes no bias: spell the mask out instead.
        mask = causal_mask(query_len, key_len, q.device)
    gqa = k.size(1) != q.size(1)
    one_masked_query = query_len == 1 and mask is not None and q.device.type == "cpu"
    if softcap is not None or one_masked_query:
        # Soft-capping has no fused kernel; and a masked decoding step on the CPU is faster written out
        # (measured: 1.16x at batch 32 with padded prompts, 1.05x compiled over a static cache).
        return _written_attention(q, k, v, mask=mask, bias=bias, causal=causal, scale=scale, cap=softcap, p=dropout_p)
    if mask is None and bias is None:
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=causal, scale=scale, dropout_p=dropout_p, enable_gqa=gqa
        )
    keep = None
    if mask is not None:
        # A row that may see nothing would softmax over -inf only (NaN in some kernels, and NaN
        # gradients): let it see everything instead, then zero its output.
        keep = mask.any(-1, keepdim=True)  # (..., L, 1)
        mask = mask | ~keep
    attn_mask = mask
    if bias is not None:
        bias = bias.to(q.dtype)
        attn_mask = bias if mask is None else torch.where(mask, bias, float("-inf"))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale, dropout_p=dropout_p, enable_gqa=gqa)
    return out if keep is None else out * keep


def _written_attention(q, k, v, *, mask, bias, causal, scale, cap, p) -> torch.Tensor:
    """``attend`` written out, with soft-capped scores where ``cap`` is set: (N, Hkv, G, L, S) scores, K/V heads
    not repeated."""
    n, h, L, d = q.shape
    hkv, S = k.size(1), k.size(2)
    scale = d**-0.5 if scale is None else scale
    scores = q.view(n, hkv, h // hkv, L, d) @ k.unsqueeze(2).transpose(-2, -1) * scale  # (N, Hkv, G, L, S)
    if cap is not None:
        scores = cap * torch.tanh(scores / cap)
    scores = scores.view(n, h, L, S)  # (N, H, L, S)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    if causal and mask is None and L > 1:
        mask = causal_mask(L, S, q.device)
    keep = None
    if mask is not None:
        keep = mask.any(-1, keepdim=True)  # rows that see nothing give zeros, as in attend
        scores = scores.masked_fill(~(mask | ~keep), float("-inf"))
    weights = scores.float().softmax(-1).to(q.dtype)
    if p > 0:
        weights = F.dropout(weights, p)
    out = (weights.view(n, hkv, h // hkv, L, S) @ v.unsqueeze(2)).view(n, h, L, v.size(-1))  # (N, H, L, Dv)
    return out if keep is None else out * keep


def _indivisible(d_model: int, heads: int, name: str) -> str:
    return f"d_model ({d_model}) must be divisible by {name} ({heads}), or set head_dim"


def _resolve_head_dim(d_model: int, heads: int, head_dim: int | None, name: str) -> int:
    if head_dim is not None:
        return head_dim
    if d_model % heads:
        raise ValueError(_indivisible(d_model, heads, name))
    return d_model // heads


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
        dropout: float,
        scale: float | None,
        causal: bool,
        cross: bool,
        softcap: float | None = None,
        window: int | None = None,
    ) -> None:
        super().__init__()
        if window is not None and window < 1:
            raise ValueError(f"window ({window}) must be >= 1, or None for no window")
        self.dropout = dropout
        self.scale = scale
        self.softcap = softcap
        self.cross = cross
        self.causal = causal and not cross  # cross-attention always sees the whole encoder output
        self.window = None if cross else window  # cross-attention sees the whole encoder output, windowless
        self.lookahead = 0 if self.causal else (window or 1) - 1  # keys after the query a window admits
        self.q_norm: nn.Module | None = None  # query/key norms, where a variant has them
        self.k_norm: nn.Module | None = None
        self.qk_norm_scope = "head"
        self.rotary: nn.Module | None = None  # this layer's own rotary encoding, instead of the stack's
        self.position_bias: nn.Module | None = None  # this layer's own score bias, instead of the stack's (UMT5)
        # Only a window or a subclass that overrides key_mask pays for the index tensors a key mask needs.
        overridden = type(self).key_mask is not _Attention.key_mask
        self.masks_keys = (overridden or self.window is not None) and not cross
        self.sparse_blocks: tuple[int, int, int] | None = None  # BigBird: (block size, random blocks, seed)

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
        not shift them). The default sees every key, or with a ``window`` the ``window`` most recent ones
        (in a bidirectional stack: keys less than ``window`` away on either side). A subclass that
        overrides this (local/global layers, block-sparse patterns) changes nothing else: causality is
        still applied on top, and decoding passes the indices of the keys its cache returns.
        With ``sparse_blocks`` it is BigBird's block-sparse pattern (:func:`block_sparse_mask`).
        """
        if self.sparse_blocks is not None:
            return block_sparse_mask(query_index, key_index, *self.sparse_blocks)
        if self.window is None:
            return None
        return sliding_window_mask(query_index, key_index, self.window, self.lookahead)

    def _heads(self, proj: nn.Module, x: torch.Tensor, heads: int, norm: nn.Module | None = None) -> torch.Tensor:
        """``proj(x)`` split into heads, ``(N, S, E) -> (N, heads, S, D)``, normalised per head or as a whole."""
        n, s, _ = x.shape
        y = proj(x)  # (N, S, heads * D)
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
        if positions is None or self.masks_keys:
            start = 0 if cache is None else cache.length  # an int, or a static cache's 0-d tensor
            query_index = start + torch.arange(L, device=x.device)  # (L,) sequence indices of the queries
        if positions is None:
            positions = query_index[None]  # (1, L)
        key_positions, key_index = positions, None
        rotary = pos if self.rotary is None else self.rotary  # a layer's own rotary replaces the stack's
        if rotary is not None:
            q, k = rotary.rotate(q, k, positions)  # before caching: cached keys keep their own rotation
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
            local = self.key_mask(query_index, key_index)
            if local is not None:
                if self.causal:
                    local = local & (key_index[None, :] <= query_index[:, None])
                mask = local if mask is None else mask & local
        scorer = pos if self.position_bias is None else self.position_bias  # a layer's own bias replaces the stack's
        bias = None if scorer is None else scorer.score_bias(positions, key_positions)
        return q, k, v, mask, bias

    def _attend(self, q, k, v, mask, bias) -> torch.Tensor:
        p = self.dropout if self.training else 0.0
        return attend(
            q, k, v, mask=mask, bias=bias, causal=self.causal, scale=self.scale, softcap=self.softcap, dropout_p=p
        )


class GroupedQueryAttention(_Attention):
    """Grouped-query attention: H query heads share Hkv key/value heads (H = Hkv is MHA, Hkv = 1 MQA).

    The one softmax attention of zoo; every option defaults to the identity, so each family switches on
    only what it needs: biases per projection (Qwen2: q/k/v but not o), a score soft-cap (Gemma 2), a
    score scale (T5: 1.0), query/key norms (Qwen3, OLMo 2), a sliding window (Mistral), a rotary encoding
    of its own (Gemma 3's local layers), and through :meth:`key_mask` any pattern of visible keys (a
    subclass).

    Args:
        d_model: width E of the input and output.
        num_heads: query heads H.
        num_kv_heads: key/value heads Hkv, dividing ``num_heads``; None means ``num_heads``.
        head_dim: features per head D; None means ``d_model // num_heads``.
        bias: learn biases in the four projections; ``q_bias`` ... ``o_bias`` override it per projection.
        dropout: dropout on the attention weights, in training only.
        scale: score scale; None means ``1 / sqrt(head_dim)``.
        softcap: scores become ``softcap * tanh(scores / softcap)`` before masking; None: no cap.
        qk_norm: builds a norm at a given width (``qk_norm(width)``) for the queries and one for the keys,
            applied before positions rotate them; None: none.
        qk_norm_scope: ``head`` normalises each head's ``head_dim`` features, ``projection`` all of a
            projection's features at once.
        window: each query sees the ``window`` most recent keys, itself included (bidirectional: keys less
            than ``window`` away), and decoding keeps a rolling cache of the window; None: every key.
        rotary: builds this layer's rotary encoding (``rotary()``), which rotates q and k instead of the
            stack's ``pos``; None: the stack's.
        sparse_block_size, random_blocks, random_seed: BigBird's block-sparse attention
            (:func:`block_sparse_mask`); None: every key.
        position_bias: builds this layer's score-bias encoding (``position_bias()``: UMT5's relative buckets in
            every layer), whose bias replaces the stack's ``pos`` bias; None: the stack's.
        causal: self-attention of a decoder: a position sees itself and earlier ones only.
        cross: keys and values come from ``context`` (the encoder output) instead of ``x``.

    Raises:
        ValueError: ``num_heads`` not divisible by ``num_kv_heads``, or ``d_model`` by ``num_heads``
            when ``head_dim`` is not given, or ``window`` < 1.
    """

    def __init__(
        self,
        d_model: int,
        *,
        num_heads: int,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        bias: bool = True,
        q_bias: bool | None = None,
        k_bias: bool | None = None,
        v_bias: bool | None = None,
        o_bias: bool | None = None,
        dropout: float = 0.0,
        scale: float | None = None,
        softcap: float | None = None,
        qk_norm: Callable[[int], nn.Module] | None = None,
        qk_norm_scope: Literal["head", "projection"] = "head",
        window: int | None = None,
        rotary: Callable[[], nn.Module] | None = None,
        position_bias: Callable[[], nn.Module] | None = None,
        sparse_block_size: int | None = None,
        random_blocks: int = 0,
        random_seed: int = 0,
        causal: bool = False,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(dropout=dropout, scale=scale, causal=causal, cross=cross, softcap=softcap, window=window)
        if sparse_block_size is not None and not self.cross:  # BigBird's block-sparse pattern of keys
            self.sparse_blocks = (sparse_block_size, random_blocks, random_seed)
            self.masks_keys = True
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be divisible by num_kv_heads ({num_kv_heads})")
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = _resolve_head_dim(d_model, num_heads, head_dim, "num_heads")
        factory = {"device": device, "dtype": dtype}
        q_dim, kv_dim = num_heads * self.head_dim, num_kv_heads * self.head_dim
        on = {
            name: bias if own is None else own
            for name, own in zip("qkvo", (q_bias, k_bias, v_bias, o_bias), strict=True)
        }
        self.q_proj = nn.Linear(d_model, q_dim, bias=on["q"], **factory)
        self.k_proj = nn.Linear(d_model, kv_dim, bias=on["k"], **factory)
        self.v_proj = nn.Linear(d_model, kv_dim, bias=on["v"], **factory)
        self.o_proj = residual_output(nn.Linear(q_dim, d_model, bias=on["o"], **factory))
        if qk_norm is not None:
            self.qk_norm_scope = qk_norm_scope
            per_head = qk_norm_scope == "head"
            self.q_norm = qk_norm(self.head_dim if per_head else q_dim)
            self.k_norm = qk_norm(self.head_dim if per_head else kv_dim)
        if rotary is not None and not self.cross:  # cross-attention rotates nothing
            self.rotary = rotary()
        if position_bias is not None and not self.cross:  # nor biases its scores by position
            self.position_bias = position_bias()

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
        """``x`` (N, L, E) -> (N, L, E); ``context`` (N, S, E) for cross-attention.

        ``mask`` is boolean (True = may attend), broadcastable to (N, H, L, S) over every key so far;
        ``positions`` (N|1, L) are absolute positions (default: ``arange`` after the cached ones); ``pos``
        is the stack's positional encoding; ``cache`` comes from :meth:`new_cache`.
        """
        n, L, _ = x.shape
        q = self._heads(self.q_proj, x, self.num_heads, self.q_norm)  # (N, H, L, D)
        q, k, v, mask, bias = self._keys_values(
            x, q, context=context, mask=mask, positions=positions, pos=pos, cache=cache
        )
        y = self._attend(q, k, v, mask, bias)  # (N, H, L, D)
        y = y.transpose(1, 2).reshape(n, L, self.num_heads * self.head_dim)  # (N, L, H*D)
        return self.o_proj(y)

    def extra_repr(self) -> str:
        extra = f", softcap={self.softcap}" if self.softcap is not None else ""
        extra += f", window={self.window}" if self.window is not None else ""
        return (
            f"num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"causal={self.causal}, cross={self.cross}{extra}"
        )


MultiHeadAttention = preset(GroupedQueryAttention, "Multi-head attention: every query head has its own K/V head.")
MultiQueryAttention = preset(
    GroupedQueryAttention,
    "Multi-query attention: all query heads share one K/V head (the smallest KV cache).",
    num_kv_heads=1,
)


class MixtureOfAttentionHeads(_Attention):
    """Mixture of attention heads (MoA): each token uses top_k of num_experts query/output heads.

    Every expert has its own query and output projection (``head_dim`` wide) over one key/value head
    shared by all experts; a router picks ``top_k`` experts per token and the token's output is the
    gate-weighted sum of its experts' outputs (gates: softmax over the chosen logits). Because K/V are
    shared, the chosen queries of a token are just ``top_k`` query "slots" attending one K/V head: one
    ``attend`` call, computed exactly. The output projections of all experts form one ``o_proj`` over
    the ``(X * D)`` features in which the unchosen experts' are zero (so there is one output bias).
    ``aux_loss`` (set every forward) is the Switch-style load-balancing loss times ``aux_loss_coef``.

    Args:
        d_model: width E of the input and output.
        num_experts: head experts X.
        top_k: experts per token K (the number of heads a positional encoding sees).
        head_dim: features per head D; None means ``d_model // top_k``.
        bias, dropout, scale, causal, cross: as in :class:`GroupedQueryAttention`.
        aux_loss_coef: weight of the load-balancing loss.
    """

    def __init__(
        self,
        d_model: int,
        *,
        num_experts: int,
        top_k: int,
        head_dim: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        scale: float | None = None,
        aux_loss_coef: float = 0.01,
        causal: bool = False,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(dropout=dropout, scale=scale, causal=causal, cross=cross)
        if top_k > num_experts:
            raise ValueError(f"top_k ({top_k}) must be <= num_experts ({num_experts})")
        self.num_experts = num_experts
        self.top_k = top_k
        self.num_heads = top_k
        self.num_kv_heads = 1
        self.head_dim = _resolve_head_dim(d_model, top_k, head_dim, "top_k")
        self.aux_loss_coef = aux_loss_coef
        self.aux_loss = torch.zeros((), device=device)
        factory = {"device": device, "dtype": dtype}
        experts_dim = num_experts * self.head_dim
        self.q_proj = nn.Linear(d_model, experts_dim, bias=bias, **factory)
        self.k_proj = nn.Linear(d_model, self.head_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(d_model, self.head_dim, bias=bias, **factory)
        self.o_proj = residual_output(nn.Linear(experts_dim, d_model, bias=bias, **factory))
        self.router = nn.Linear(d_model, num_experts, bias=False, **factory)

    def forward(
        self,
        x: torch.Tensor,
        *,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        pos: Any = None,
        cache: KVCache | CrossKVCache | None = None,
    ) -> torch.Tensor:
        """``x`` (N, L, E) -> (N, L, E); arguments as in :meth:`GroupedQueryAttention.forward`."""
        n, L, _ = x.shape
        X, K, D = self.num_experts, self.top_k, self.head_dim
        logits = self.router(x)  # (N, L, X)
        top_logits, experts = logits.topk(K, dim=-1)  # (N, L, K)
        gates = top_logits.softmax(dim=-1)  # renormalised over the chosen experts
        slots = experts.unsqueeze(-1).expand(n, L, K, D)  # which expert's D features each slot uses
        q = self.q_proj(x).view(n, L, X, D).gather(2, slots).transpose(1, 2)  # (N, K, L, D)
        q, k, v, mask, bias = self._keys_values(
            x, q, context=context, mask=mask, positions=positions, pos=pos, cache=cache
        )
        y = self._attend(q, k, v, mask, bias)  # (N, K, L, D)
        y = y.transpose(1, 2) * gates.unsqueeze(-1)  # (N, L, K, D)
        y = y.new_zeros(n, L, X, D).scatter(2, slots, y)  # (N, L, X, D), unchosen experts zero
        self.aux_loss = self._balance_loss(logits, experts)
        return self.o_proj(y.view(n, L, X * D))

    def _balance_loss(self, logits: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
        # Switch Transformer: X * sum_e f_e * P_e is 1 when routing is uniform and grows as it collapses.
        routed = F.one_hot(experts, self.num_experts).float().mean(dim=(0, 1, 2))  # f_e, over token-slots
        prob = logits.float().softmax(dim=-1).mean(dim=(0, 1))  # P_e
        return self.aux_loss_coef * self.num_experts * (routed * prob).sum()

    def extra_repr(self) -> str:
        return (
            f"num_experts={self.num_experts}, top_k={self.top_k}, head_dim={self.head_dim}, "
            f"causal={self.causal}, cross={self.cross}"
        )


class AttentionConfig(ComponentConfig):
    """Fields shared by multi-head, grouped-query and multi-query attention."""

    num_heads: int = Field(ge=1, le=MAX_HEADS, description="Query heads.")
    head_dim: int | None = Field(
        None, ge=1, le=MAX_HEAD_DIM, description="Features per head; default d_model // num_heads."
    )
    bias: bool = Field(True, description="Learn biases in the q/k/v/o projections.")
    q_bias: bool | None = Field(None, description="Bias on the query projection; default `bias`.")
    k_bias: bool | None = Field(None, description="Bias on the key projection; default `bias`.")
    v_bias: bool | None = Field(None, description="Bias on the value projection; default `bias`.")
    o_bias: bool | None = Field(None, description="Bias on the output projection; default `bias` (Qwen2: false).")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the attention weights (training).")
    scale: float | None = Field(None, gt=0, description="Score scale; default 1/sqrt(head_dim) (T5: 1.0).")
    softcap: float | None = Field(None, gt=0, description="Cap scores at ±softcap with tanh (Gemma 2: 50).")
    qk_norm: Annotated[dict[str, Any] | str | None, Spec("norm")] = Field(
        None, description="Normalise queries and keys with this norm (Qwen3, Gemma 3: rmsnorm); none by default."
    )
    qk_norm_scope: Literal["head", "projection"] = Field(
        "head", description="head: over each head's head_dim (Qwen3); projection: over the whole q/k (OLMo 2)."
    )
    window: int | None = Field(
        None,
        ge=1,
        description="Sliding window: each query sees the `window` most recent keys, itself included (Mistral 7B: "
        "4096), and decoding caches only those; default every key.",
    )
    rotary: Annotated[dict[str, Any] | str | None, Spec("positional")] = Field(
        None,
        description="This layer's own rotary encoding instead of the stack's rope (Gemma 3's local layers: "
        "{type: rope, theta: 10000.0}); default the stack's.",
    )
    position_bias: Annotated[dict[str, Any] | str | None, Spec("positional")] = Field(
        None,
        description="This layer's own score-bias encoding, replacing the stack's bias (UMT5: {type: t5_relative} in "
        "every layer); default the stack's.",
    )

    sparse_block_size: int | None = Field(
        None,
        ge=1,
        description="Block-sparse attention (BigBird) over blocks of this many tokens: each query sees its block and "
        "the two beside it, the first and last (global) blocks and random_blocks others; sequences of at most "
        "(5 + 2 * random_blocks) blocks attend fully, as transformers' BigBird does. Encoders only.",
    )
    random_blocks: int = Field(0, ge=0, le=MAX_HEADS, description="Block-sparse: random key blocks per query block.")
    random_seed: int = Field(0, ge=0, description="Block-sparse: which random blocks (a fixed choice per seed).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_heads": 4},
        {"num_heads": 4, "head_dim": 6, "bias": False, "q_bias": True, "v_bias": True, "softcap": 5.0},
        {"num_heads": 4, "sparse_block_size": 2, "random_blocks": 0},
        {"num_heads": 4, "qk_norm": "rmsnorm"},
        {"num_heads": 4, "window": 3},
        {"num_heads": 4, "rotary": {"type": "rope", "theta": 100.0}},
        {"num_heads": 4, "position_bias": {"type": "t5_relative", "num_buckets": 8, "max_distance": 16}},
    )

    def head_dim_for(self, d_model: int) -> int:
        """The head width this config gives in a model of width ``d_model``."""
        return self.head_dim if self.head_dim is not None else d_model // self.num_heads

    num_kv_heads: ClassVar[int]  # each variant says how many K/V heads serve its query heads

    def check(self, ctx: BuildContext) -> list[str]:
        problems = []
        if self.num_heads % self.num_kv_heads:
            problems.append(f"num_heads ({self.num_heads}) must be divisible by num_kv_heads ({self.num_kv_heads})")
        if self.head_dim is None and ctx.d_model % self.num_heads:
            problems.append(_indivisible(ctx.d_model, self.num_heads, "num_heads"))
        if self.rotary is not None and not ctx.cross:
            problems += self._rotary_problems(ctx)
        if self.position_bias is not None and not ctx.cross:
            problems += self._position_bias_problems(ctx)
        if self.sparse_block_size is not None and (ctx.causal or self.window is not None):
            problems.append(
                "sparse_block_size: BigBird's block-sparse attention is bidirectional and windowless (an encoder's, "
                "without window)"
            )
        return problems

    def _position_bias_problems(self, ctx: BuildContext) -> list[str]:
        """Why ``position_bias`` cannot bias this attention's scores: not a score-bias encoding, or its own check."""
        from zoo.plugins import get_registry
        from zoo.recipe import validate_spec

        config = validate_spec(get_registry(), "positional", self.position_bias, "position_bias", [])
        if config is None:
            return []  # an invalid spec: validating the recipe has said why
        if getattr(type(config), "style", None) != "bias":
            return [
                f"position_bias: positional '{config.type}' adds no score bias; give one such as {{type: t5_relative}}"
            ]
        return [f"position_bias: {m}" for m in config.check(ctx)]

    def _rotary_problems(self, ctx: BuildContext) -> list[str]:
        """Why ``rotary`` cannot replace the stack's rotation here: not a rotary encoding, a stack that does not
        rotate (its positional is not rope), or the encoding's own check at this attention's heads."""
        from zoo.plugins import get_registry
        from zoo.recipe import validate_spec

        config = validate_spec(get_registry(), "positional", self.rotary, "rotary", [])
        if config is None:
            return []  # an invalid spec: validating the recipe has said why
        problems = []
        if getattr(type(config), "style", None) != "rotate":
            problems.append(
                f"rotary: positional '{config.type}' does not rotate queries and keys; give a rotary encoding "
                "such as {type: rope, theta: 10000.0}"
            )
        if ctx.positional is not None and ctx.positional != "rope":
            problems.append(
                f"rotary replaces the stack's rope in this layer, but the stack's positional is "
                f"'{ctx.positional}'; set positional: {{type: rope}} or remove rotary"
            )
        if not problems:
            problems += [f"rotary: {m}" for m in config.check(ctx)]
        return problems

    def biases(self) -> dict[str, bool]:
        """Whether each of the q, k, v, o projections has a bias."""
        own = (self.q_bias, self.k_bias, self.v_bias, self.o_bias)
        return {name: self.bias if b is None else b for name, b in zip("qkvo", own, strict=True)}

    def cost(self, ctx: BuildContext) -> Cost:
        # q and o: E·H·D each; k and v: E·Hkv·D each. MHA (Hkv = H, D = E/H) gives the familiar 4E² + 4E.
        E, H, Hkv, D = ctx.d_model, self.num_heads, self.num_kv_heads, self.head_dim_for(ctx.d_model)
        weights = 2 * E * H * D + 2 * E * Hkv * D
        on = self.biases()
        biases = on["q"] * H * D + (on["k"] + on["v"]) * Hkv * D + on["o"] * E
        norms = norm_acts = 0
        if self.qk_norm is not None:  # one norm for q and one for k, at a head's width or a projection's
            q_width, k_width = (D, D) if self.qk_norm_scope == "head" else (H * D, Hkv * D)
            norms = sum(nested_cost("norm", self.qk_norm, replace(ctx, d_model=w)).params for w in (q_width, k_width))
            norm_acts = H * D + Hkv * D
        if self.position_bias is not None and not ctx.cross:  # this layer's own table (cross-attention has none)
            norms += nested_cost("positional", self.position_bias, ctx).params
        return Cost(
            params=weights + biases + norms,
            matmul=weights,
            score_width=H * D,
            kv_width=Hkv * D,
            window=None if ctx.cross else self.window,  # caps the keys scored and cached per query
            acts=E + 2 * H * D + 2 * Hkv * D + norm_acts,  # input, q, k, v, attention output (and normed q, k)
        )


class MHAConfig(AttentionConfig):
    type: Literal["mha"] = "mha"

    @property
    def num_kv_heads(self) -> int:
        return self.num_heads


class GQAConfig(AttentionConfig):
    type: Literal["gqa"] = "gqa"
    num_kv_heads: int = Field(ge=1, le=MAX_HEADS, description="Key/value heads; each serves num_heads // num_kv_heads.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_heads": 4, "num_kv_heads": 2},
        {"num_heads": 4, "num_kv_heads": 1, "head_dim": 6, "bias": False, "o_bias": True, "softcap": 5.0},
        {"num_heads": 4, "num_kv_heads": 2, "qk_norm": {"type": "layernorm"}, "qk_norm_scope": "projection"},
    )


class MQAConfig(AttentionConfig):
    type: Literal["mqa"] = "mqa"

    @property
    def num_kv_heads(self) -> int:
        return 1


class MoAConfig(ComponentConfig):
    type: Literal["moa"] = "moa"
    num_experts: int = Field(
        ge=1, le=MAX_EXPERTS, description="Head experts, each with its own query/output projection."
    )
    top_k: int = Field(ge=1, le=MAX_EXPERTS, description="Experts each token is routed to.")
    head_dim: int | None = Field(
        None, ge=1, le=MAX_HEAD_DIM, description="Features per head; default d_model // top_k."
    )
    bias: bool = Field(True, description="Learn biases in the q/k/v/o projections.")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the attention weights (training).")
    scale: float | None = Field(None, gt=0, description="Score scale; default 1/sqrt(head_dim).")
    aux_loss_coef: float = Field(0.01, ge=0.0, description="Weight of the load-balancing loss.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({"num_experts": 4, "top_k": 2},)

    @model_validator(mode="after")
    def _top_k_within_experts(self) -> MoAConfig:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= num_experts ({self.num_experts})")
        return self

    @property
    def num_heads(self) -> int:
        """Heads as positional encodings see them: one per chosen expert."""
        return self.top_k

    @property
    def num_kv_heads(self) -> int:
        return 1

    def head_dim_for(self, d_model: int) -> int:
        """The head width this config gives in a model of width ``d_model``."""
        return self.head_dim if self.head_dim is not None else d_model // self.top_k

    def check(self, ctx: BuildContext) -> list[str]:
        if self.head_dim is None and ctx.d_model % self.top_k:
            return [_indivisible(ctx.d_model, self.top_k, "top_k")]
        return []

    def cost(self, ctx: BuildContext) -> Cost:
        # X experts of (q: E·D, o: D·E) over one shared K/V head, and an E·X router; a token uses top_k experts.
        E, X, K, D = ctx.d_model, self.num_experts, self.top_k, self.head_dim_for(ctx.d_model)
        bias = int(self.bias)
        params = 2 * E * X * D + 2 * E * D + E * X + bias * (X * D + 2 * D + E)
        unused = (X - K) * (2 * E * D + bias * D)
        return Cost(
            params=params,
            active=params - unused,
            matmul=2 * E * X * D + 2 * E * D + E * X,  # q and o projections run dense over all X experts
            score_width=K * D,
            kv_width=D,
            acts=E + X + 2 * X * D + 2 * K * D + 2 * D,
        )


@hookimpl
def register_components(register):
    register("attention", "mha", MultiHeadAttention, MHAConfig)
    register("attention", "gqa", GroupedQueryAttention, GQAConfig)
    register("attention", "mqa", MultiQueryAttention, MQAConfig)
    register("attention", "moa", MixtureOfAttentionHeads, MoAConfig)
