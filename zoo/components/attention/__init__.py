r"""Attention: multi-head, grouped-query, multi-query, and a mixture of attention heads.

Every variant attends through its ``kernel`` (``zoo.components.kernels``; ``sdpa`` unless the model was built
or is decoding with another). MHA, GQA and MQA are one implementation (``GroupedQueryAttention``) that differ
only in how many key/value heads serve the query heads::

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

Llama 4's ``chunk_size`` cuts the positions into chunks, and a query sees the keys of its own chunk only (causal:
up to itself); it decodes with a rolling cache of one chunk. Its NoPE layers may also scale each query by a
temperature of its sequence index (``temperature_floor_scale``, ``temperature_scale``), and a q/k norm may apply to
the rotated heads (``qk_norm_position: after_rope``: Llama 4, HunYuan); DBRX clamps q, k and v (``clip_qkv``).

Shapes: N batch, L query length, S key length, E d_model, H query heads, Hkv key/value heads,
D head_dim, X num_experts, K top_k, W window.

The package holds one file per concern: ``masks`` (which keys a query sees), ``base`` (what every attention
shares: keys, values, positions, caches), ``gqa`` (grouped-query attention and its presets), ``moa`` and
``disentangled`` (DeBERTa's content and relative-position scores, over the stack's ``deberta_relative`` table),
``local`` (LongT5's encoder attention: a window computed in blocks, and transient-global tokens) and
``longformer`` (LED's encoder: a sliding window in both directions plus global tokens with projections of their
own).
"""

from __future__ import annotations

from zoo.hookspecs import hookimpl

from .base import QueryTemperature, _Attention
from .disentangled import DisentangledAttention, DisentangledConfig
from .gqa import (
    AttentionConfig,
    GQAConfig,
    GroupedQueryAttention,
    LayerPositions,
    MHAConfig,
    MQAConfig,
    MultiHeadAttention,
    MultiQueryAttention,
    ProjectionBiases,
    QKNorm,
)
from .local import LocalAttention, LocalConfig, TransientGlobalConfig, global_blocks
from .longformer import LongformerAttention, LongformerConfig
from .masks import (
    BlockSparse,
    Chunks,
    KeyMask,
    SlidingWindow,
    block_sparse_mask,
    causal_mask,
    chunked_mask,
    random_block_choice,
    sliding_window_mask,
)
from .moa import MixtureOfAttentionHeads, MoAConfig

__all__ = [
    "causal_mask",
    "chunked_mask",
    "sliding_window_mask",
    "block_sparse_mask",
    "random_block_choice",
    "BlockSparse",
    "Chunks",
    "KeyMask",
    "LayerPositions",
    "ProjectionBiases",
    "QKNorm",
    "QueryTemperature",
    "SlidingWindow",
    "MultiHeadAttention",
    "GroupedQueryAttention",
    "MultiQueryAttention",
    "MixtureOfAttentionHeads",
    "DisentangledAttention",
    "DisentangledConfig",
    "LocalAttention",
    "LocalConfig",
    "TransientGlobalConfig",
    "global_blocks",
    "LongformerAttention",
    "LongformerConfig",
    "AttentionConfig",
    "MHAConfig",
    "GQAConfig",
    "MQAConfig",
    "MoAConfig",
    "_Attention",
]


@hookimpl
def register_components(register):
    register("attention", "mha", MultiHeadAttention, MHAConfig)
    gqa = "Grouped-query attention: H query heads share Hkv key/value heads (H = Hkv is MHA, Hkv = 1 MQA)."
    register("attention", "gqa", GroupedQueryAttention.from_options, GQAConfig, description=gqa)
    register("attention", "mqa", MultiQueryAttention, MQAConfig)
    register("attention", "moa", MixtureOfAttentionHeads, MoAConfig)
    register("attention", "disentangled", DisentangledAttention, DisentangledConfig)
    register("attention", "local", LocalAttention, LocalConfig)
    register("attention", "transient_global", LocalAttention, TransientGlobalConfig)
    register("attention", "longformer", LongformerAttention, LongformerConfig)
