"""What each component costs, from its config alone: parameters, matmul work, K/V width, activations.

These are the textbook formulas (``E`` = d_model, ``H`` query heads, ``Hkv`` key/value heads, ``D`` head_dim,
``V`` vocabulary), written once per registered component and never read off a module: that is the point of
comparing them with the parameters a built model actually holds.

Formulas are registered for config classes and found along the config's class hierarchy, so a plugin
config that extends a built-in one (a sliding-window attention extending ``AttentionConfig``) is costed as
its base until it registers a formula of its own, with the same decorator the built-ins use::

    from zoo.analysis.formulas import Cost, formula

    @formula(MyFFNConfig)
    def my_ffn(config, ctx, nested):
        return Cost(params=2 * ctx.d_model * config.hidden, matmul=2 * ctx.d_model * config.hidden)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zoo.components.attention import AttentionConfig, MoAConfig
from zoo.components.embedding import PatchEmbeddingConfig, TokenEmbeddingConfig
from zoo.components.ffn import GatedConfig, MLPConfig, gated_hidden
from zoo.components.heads import ClassificationHeadConfig, LMHeadConfig, MaskedLMHeadConfig, PoolerConfig
from zoo.components.moe import MoEConfig
from zoo.components.norm import LayerNormConfig, RMSNormConfig
from zoo.components.positional import (
    ALiBiConfig,
    LearnedConfig,
    NoPositionalConfig,
    RopeConfig,
    SinusoidalConfig,
    T5RelativeConfig,
)
from zoo.config import BuildContext

__all__ = ["Cost", "FORMULAS", "Formula", "component_cost", "formula"]


@dataclass(frozen=True)
class Cost:
    """The cost of one component. All figures are per token unless ``per_sequence``.

    ``active`` defaults to ``params``; it is smaller for routed components (MoE), where a token passes
    through ``top_k`` of ``num_experts`` experts.
    """

    params: int
    active: int | None = None
    matmul: int = 0
    """Weight elements multiplied per token in a forward pass: 2 FLOPs (multiply + add) each."""
    score_width: int = 0
    """H·D of an attention: scores (QK^T) and their use (AV) cost 2·2·L·H·D FLOPs per token at length L."""
    kv_width: int = 0
    """Hkv·D of an attention: the keys (and as many values) a KV cache stores per token."""
    acts: int = 0
    """Activation elements per token this component keeps for the backward pass."""
    per_sequence: bool = False
    """The component runs once per sequence (a classifier on the CLS vector), not once per token."""
    window: int | None = None
    """An attention whose queries see at most this many keys (sliding window): caps the L term and the cache."""

    @property
    def active_params(self) -> int:
        return self.params if self.active is None else self.active


NestedCost = Callable[[str, Any], "Cost | None"]
Formula = Callable[[Any, BuildContext, NestedCost], Cost]

FORMULAS: dict[type, Formula] = {}
"""Config class -> formula(config, ctx, nested) -> Cost; ``nested(kind, spec)`` costs a nested spec."""


def formula(*configs: type) -> Callable[[Formula], Formula]:
    """Register ``fn`` as the cost formula of components configured by ``configs`` (and their subclasses)."""

    def register(fn: Formula) -> Formula:
        for config in configs:
            FORMULAS[config] = fn
        return fn

    return register


def component_cost(config: Any, ctx: BuildContext, nested: NestedCost) -> Cost | None:
    """The cost of one configured component, or None when no formula covers its config class."""
    for cls in type(config).__mro__:
        if cls in FORMULAS:
            return FORMULAS[cls](config, ctx, nested)
    return None


# ---------------------------------------------------------------------------------------------- embedding


@formula(TokenEmbeddingConfig)
def _token_embedding(config, ctx: BuildContext, nested) -> Cost:
    # V·E token table plus a segment table; a lookup multiplies nothing.
    return Cost(params=(ctx.vocab_size + ctx.type_vocab_size) * ctx.d_model)


@formula(PatchEmbeddingConfig)
def _patch_embedding(config, ctx: BuildContext, nested) -> Cost:
    # A Conv2d with kernel = stride = P is one (C·P·P -> E) matmul per patch, plus its bias and the CLS vector.
    patch = ctx.num_channels * ctx.patch_size**2
    E = ctx.d_model
    return Cost(params=patch * E + E + E * int(config.cls_token), matmul=patch * E, acts=patch)


# ---------------------------------------------------------------------------------------------- positional


@formula(NoPositionalConfig, SinusoidalConfig, RopeConfig, ALiBiConfig)
def _fixed_positions(config, ctx: BuildContext, nested) -> Cost:
    return Cost(params=0)  # computed from positions (sinusoidal tables are non-persistent buffers)


@formula(LearnedConfig)
def _learned_positions(config, ctx: BuildContext, nested) -> Cost:
    return Cost(params=ctx.max_len * ctx.d_model)


@formula(T5RelativeConfig)
def _t5_buckets(config, ctx: BuildContext, nested) -> Cost:
    return Cost(params=config.num_buckets * ctx.num_heads)


# ---------------------------------------------------------------------------------------------- attention


@formula(AttentionConfig)
def _grouped_query_attention(config, ctx: BuildContext, nested) -> Cost:
    # q and o: E·H·D each; k and v: E·Hkv·D each. MHA (Hkv = H, D = E/H) gives the familiar 4E² + 4E.
    E, H, D = ctx.d_model, config.num_heads, config.head_dim_for(ctx.d_model)
    Hkv = getattr(config, "num_kv_heads", None) or H
    weights = 2 * E * H * D + 2 * E * Hkv * D
    biases = (H * D + 2 * Hkv * D + E) if config.bias else 0
    return Cost(
        params=weights + biases,
        matmul=weights,
        score_width=H * D,
        kv_width=Hkv * D,
        acts=E + 2 * H * D + 2 * Hkv * D,  # input, q, k, v, attention output
    )


@formula(MoAConfig)
def _mixture_of_attention_heads(config, ctx: BuildContext, nested) -> Cost:
    # X experts of (q: E·D, o: D·E) over one shared K/V head, and an E·X router; a token uses top_k experts.
    E, X, K, D = ctx.d_model, config.num_experts, config.top_k, config.head_dim_for(ctx.d_model)
    bias = int(config.bias)
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


# ---------------------------------------------------------------------------------------------- ffn


@formula(MLPConfig)
def _mlp(config, ctx: BuildContext, nested) -> Cost:
    E = ctx.d_model
    H = config.hidden if config.hidden is not None else 4 * E
    return Cost(params=2 * E * H + ((H + E) if config.bias else 0), matmul=2 * E * H, acts=E + 2 * H)


@formula(GatedConfig)
def _gated_mlp(config, ctx: BuildContext, nested) -> Cost:
    E = ctx.d_model
    H = config.hidden if config.hidden is not None else gated_hidden(E, config.multiple_of)
    # gate, up: E·H each; down: H·E. Saved: input, gate, up, act(gate), their product.
    return Cost(params=3 * E * H + ((2 * H + E) if config.bias else 0), matmul=3 * E * H, acts=E + 4 * H)


@formula(MoEConfig)
def _mixture_of_experts(config, ctx: BuildContext, nested) -> Cost | None:
    E, X, K = ctx.d_model, config.num_experts, config.top_k
    expert = nested("ffn", config.expert)
    shared = nested("ffn", config.shared_expert) if config.shared_expert is not None else Cost(params=0)
    if expert is None or shared is None:
        return None
    router = E * X
    return Cost(
        params=router + X * expert.params + shared.params,
        active=router + K * expert.active_params + shared.active_params,
        matmul=router + K * expert.matmul + shared.matmul,
        acts=E + X + K * expert.acts + shared.acts,
    )


# ---------------------------------------------------------------------------------------------- norm


@formula(LayerNormConfig)
def _layernorm(config, ctx: BuildContext, nested) -> Cost:
    # Scale and shift: 2E; E without the shift (bias: false); nothing when not affine.
    per_feature = (2 if config.bias else 1) if config.affine else 0
    return Cost(params=per_feature * ctx.d_model, acts=ctx.d_model)


@formula(RMSNormConfig)
def _rmsnorm(config, ctx: BuildContext, nested) -> Cost:
    return Cost(params=ctx.d_model if config.affine else 0, acts=ctx.d_model)


# ---------------------------------------------------------------------------------------------- head


@formula(LMHeadConfig)
def _lm_head(config, ctx: BuildContext, nested) -> Cost:
    # A tied head reuses the token table (counted with the embedding) but still multiplies by it.
    E, V = ctx.d_model, ctx.vocab_size
    params = (0 if config.tie_embeddings else V * E) + (V if config.bias else 0)
    return Cost(params=params, matmul=V * E, acts=E + V)


@formula(MaskedLMHeadConfig)
def _masked_lm_head(config, ctx: BuildContext, nested) -> Cost:
    # dense E·E + E, LayerNorm 2E, decoder V·E (tied or not) with its own V bias.
    E, V = ctx.d_model, ctx.vocab_size
    params = E * E + E + 2 * E + (0 if config.tie_embeddings else V * E) + V
    return Cost(params=params, matmul=E * E + V * E, acts=3 * E + V)


@formula(ClassificationHeadConfig)
def _classification_head(config, ctx: BuildContext, nested) -> Cost:
    E, C = ctx.d_model, ctx.num_classes
    pooler = (E * E + E) if config.pooler else 0
    return Cost(params=pooler + E * C + C, matmul=(E * E if config.pooler else 0) + E * C, per_sequence=True)


@formula(PoolerConfig)
def _pooler_head(config, ctx: BuildContext, nested) -> Cost:
    E = ctx.d_model
    return Cost(params=E * E + E, matmul=E * E, per_sequence=True)
