"""Grouped-query attention, and multi-head and multi-query attention as its presets, with their configs.

Shapes: N batch, L query length, S key length, E d_model, H query heads, Hkv key/value heads, D head_dim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Annotated, Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.components.kernels import Kernel, sdpa
from zoo.config import BuildContext, ComponentConfig, Nested, Spec, nested_config
from zoo.cost import Cost, nested_cost
from zoo.init import residual_output
from zoo.label import SKIP_OPTIONS, Label, attention_label
from zoo.limits import MAX_HEAD_DIM, MAX_HEADS
from zoo.registry import preset
from zoo.tensor_parallel import check_divides, refuse

from .base import (
    LayerPositions,
    ProjectionBiases,
    QKNorm,
    QueryTemperature,
    _Attention,
    _indivisible,
    _resolve_head_dim,
)
from .masks import BlockSparse, Chunks, KeyMask, SlidingWindow
from .sinks import with_sinks

SINKS_AND_SOFTCAP = "sinks with softcap: the kernels would cap the sink's logit too (no model has both)"
STACK_POSITIONS = LayerPositions()  # no encoding of the layer's own: the stack's
QK_NORM_AFTER_ROPE = "qk_norm_position after_rope normalises each rotated head: it needs qk_norm_scope head"


class GroupedQueryAttention(_Attention):
    """Grouped-query attention: H query heads share Hkv key/value heads (H = Hkv is MHA, Hkv = 1 MQA).

    The one softmax attention of zoo. Its options come in seams, each defaulting to the identity, so each family
    switches on only what it needs: the projections' biases and clamp (DBRX), q/k norms (Qwen3, OLMo 2; after the
    rotation: Llama 4, HunYuan), positions of the layer's own (Gemma 3's local rotary, UMT5's bias), a temperature
    per query (Llama 4), the keys a query sees (a sliding window, Llama 4's chunks, BigBird's blocks; through
    :meth:`key_mask` any pattern, in a subclass), the kernel and its scale, soft-cap (Gemma 2) and dropout, and
    the cache (sized by the key mask's window). A recipe's flat options become these seams in
    :meth:`from_options`, the registered factory.

    Args:
        d_model: width E of the input and output.
        num_heads: query heads H.
        num_kv_heads: key/value heads Hkv, dividing ``num_heads``; None means ``num_heads``.
        head_dim: features per head D; None means ``d_model // num_heads``.
        bias: a bias in every projection (True), none (False), or per projection (:class:`ProjectionBiases`).
        qk_norm: normalise queries and keys (:class:`QKNorm`); None: not.
        positions: this layer's own encodings (:class:`LayerPositions`); by default the stack's ``pos``.
        key_mask: the keys each query sees beyond padding and causality (``masks.SlidingWindow``, ``masks.Chunks``,
            ``masks.BlockSparse``), whose ``window`` sizes the decoding cache (a rolling buffer); None: every key.
        temperature: scale each query by a factor of its sequence index (:class:`base.QueryTemperature`, Llama 4's
            NoPE layers), after any rotation and norm; None: not.
        clip_qkv: clamp the q, k and v projections to ``[-clip_qkv, clip_qkv]`` before anything else (DBRX);
            None: not.
        kernel: computes the attention from q, k, v (``zoo.components.kernels``); ``zoo.use_kernel`` swaps it.
        scale: score scale; None means ``1 / sqrt(head_dim)``.
        softcap: scores become ``softcap * tanh(scores / softcap)`` before masking; None: no cap.
        dropout: dropout on the attention weights, in training only.
        sinks: a learned logit per query head in every softmax denominator, its value zero (gpt-oss;
            ``attention.sinks``); zeros until trained or loaded.
        causal: self-attention of a decoder: a position sees itself and earlier ones only.
        cross: keys and values come from ``context`` (the encoder output) instead of ``x``; no key mask, no
            positions of its own.

    Raises:
        ValueError: ``num_heads`` not divisible by ``num_kv_heads``, or ``d_model`` by ``num_heads``
            when ``head_dim`` is not given, or a window < 1, or sinks with a soft-cap.
    """

    # LoRA (zoo.lora) may adapt these linears: attribute -> the kind that train.lora.targets selects.
    adaptable: ClassVar[dict[str, str]] = dict.fromkeys(("q_proj", "k_proj", "v_proj", "o_proj"), "attention")

    def __init__(
        self,
        d_model: int,
        *,
        num_heads: int,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        bias: bool | ProjectionBiases = True,
        qk_norm: QKNorm | None = None,
        positions: LayerPositions = STACK_POSITIONS,
        key_mask: KeyMask | None = None,
        temperature: QueryTemperature | None = None,
        clip_qkv: float | None = None,
        kernel: Kernel = sdpa,
        scale: float | None = None,
        softcap: float | None = None,
        dropout: float = 0.0,
        sinks: bool = False,
        causal: bool = False,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            kernel=kernel, scale=scale, softcap=softcap, dropout=dropout, key_mask=key_mask, causal=causal, cross=cross
        )
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be divisible by num_kv_heads ({num_kv_heads})")
        if sinks and softcap is not None:
            raise ValueError(SINKS_AND_SOFTCAP)
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = _resolve_head_dim(d_model, num_heads, head_dim, "num_heads")
        factory = {"device": device, "dtype": dtype}
        q_dim, kv_dim = num_heads * self.head_dim, num_kv_heads * self.head_dim
        on = ProjectionBiases(bias, bias, bias, bias) if isinstance(bias, bool) else bias
        self.q_proj = nn.Linear(d_model, q_dim, bias=on.q, **factory)
        self.k_proj = nn.Linear(d_model, kv_dim, bias=on.k, **factory)
        self.v_proj = nn.Linear(d_model, kv_dim, bias=on.v, **factory)
        self.o_proj = residual_output(nn.Linear(q_dim, d_model, bias=on.o, **factory))
        self.sinks = nn.Parameter(torch.zeros(num_heads, **factory)) if sinks else None
        self.temperature = None if cross else temperature
        self.clip_qkv = clip_qkv
        if qk_norm is not None:
            if qk_norm.after_rope and qk_norm.scope != "head":
                raise ValueError(QK_NORM_AFTER_ROPE)
            self.qk_norm_scope, self.qk_norm_after_rope = qk_norm.scope, qk_norm.after_rope
            per_head = qk_norm.scope == "head"
            self.q_norm = qk_norm.build(self.head_dim if per_head else q_dim)
            self.k_norm = qk_norm.build(self.head_dim if per_head else kv_dim)
        if positions.rotary is not None and not self.cross:  # cross-attention rotates nothing
            self.rotary = positions.rotary()
        if positions.score_bias is not None and not self.cross:  # nor biases its scores by position
            self.position_bias = positions.score_bias()

    @classmethod
    def from_options(
        cls,
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
        qk_norm: Callable[[int], nn.Module] | None = None,
        qk_norm_scope: Literal["head", "projection"] = "head",
        qk_norm_position: Literal["before_rope", "after_rope"] = "before_rope",
        rotary: Callable[[], nn.Module] | None = None,
        position_bias: Callable[[], nn.Module] | None = None,
        window: int | None = None,
        chunk_size: int | None = None,
        temperature_floor_scale: int | None = None,
        temperature_scale: float | None = None,
        clip_qkv: float | None = None,
        sparse_block_size: int | None = None,
        random_blocks: int = 0,
        random_seed: int = 0,
        kernel: Kernel = sdpa,
        scale: float | None = None,
        softcap: float | None = None,
        dropout: float = 0.0,
        sinks: bool = False,
        causal: bool = False,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> GroupedQueryAttention:
        """The attention of a recipe's flat options (the fields of ``AttentionConfig``, nested specs as builders),
        grouped into the seams of the constructor: the registered factory of ``gqa``, ``mha`` and ``mqa``."""
        own = (q_bias, k_bias, v_bias, o_bias)
        biases = ProjectionBiases(*(bias if b is None else b for b in own))
        key_mask = None
        if window is not None:
            key_mask = SlidingWindow(window)
        elif chunk_size is not None:
            key_mask = Chunks(chunk_size)
        elif sparse_block_size is not None:
            key_mask = BlockSparse(sparse_block_size, random_blocks, random_seed)
        temperature = None
        if temperature_floor_scale is not None and temperature_scale is not None:
            temperature = QueryTemperature(temperature_floor_scale, temperature_scale)
        after_rope = qk_norm_position == "after_rope"
        return cls(
            d_model,
            num_heads=num_heads,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            bias=biases,
            qk_norm=None if qk_norm is None else QKNorm(qk_norm, qk_norm_scope, after_rope),
            positions=LayerPositions(rotary, position_bias),
            key_mask=key_mask,
            temperature=temperature,
            clip_qkv=clip_qkv,
            kernel=kernel,
            scale=scale,
            softcap=softcap,
            dropout=dropout,
            sinks=sinks,
            causal=causal,
            cross=cross,
            device=device,
            dtype=dtype,
        )

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
        p, scale = self.dropout if self.training else 0.0, self.scale
        if self.sinks is not None:  # one more key per query head: the sink (``sinks.py``)
            scale = self.head_dim**-0.5 if scale is None else scale
            q, k, v, mask, bias = with_sinks(q, k, v, mask, bias, self.sinks, scale)
        y = self.kernel(
            q, k, v, mask=mask, bias=bias, causal=self.causal, scale=scale, softcap=self.softcap, dropout_p=p
        )
        # y: (N, H, L, D)
        y = y.transpose(1, 2).reshape(n, L, self.num_heads * self.head_dim)  # (N, L, H*D)
        return self.o_proj(y)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the heads split over the ranks. q, k and v are split
        column-wise (each rank computes its own heads, whole), o row-wise (the ranks' partial outputs are summed),
        and this module then counts its own heads only. Per-head q/k norms and rotations stay whole."""
        size, where = mesh.size(), f"attention of {self.num_heads} heads"
        check_divides(where, size, num_heads=self.num_heads, num_kv_heads=self.num_kv_heads)
        if self.sinks is not None:
            refuse(where, "sinks (one learned logit per head)", size)
        if self.q_norm is not None and self.qk_norm_scope == "projection":
            refuse(where, "a q/k norm over the whole projection (qk_norm_scope: projection)", size)
        for norm in (self.q_norm, self.k_norm):  # per head, on each rank's heads: their gradients add up
            if norm is not None and any(True for _ in norm.parameters()):
                if not hasattr(norm, "sum_gradients_over"):
                    refuse(where, f"a q/k norm of type {type(norm).__name__} (no sum_gradients_over)", size)
                norm.sum_gradients_over(mesh.get_group())
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        plan = {"q_proj": ColwiseParallel(), "k_proj": ColwiseParallel(), "v_proj": ColwiseParallel()}
        parallelize_module(self, mesh, {**plan, "o_proj": RowwiseParallel()})
        if self.position_bias is not None:  # this layer's own score bias: its heads split the same way
            self.position_bias.shard_tensor(mesh)
        self.num_heads //= size
        self.num_kv_heads //= size

    def extra_repr(self) -> str:
        extra = f", softcap={self.softcap}" if self.softcap is not None else ""
        extra += (
            f", {'chunk_size' if isinstance(self.pattern, Chunks) else 'window'}={self.window}" if self.window else ""
        )
        extra += ", sinks=True" if self.sinks is not None else ""
        return (
            f"num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"causal={self.causal}, cross={self.cross}{extra}"
        )


MultiHeadAttention = preset(
    GroupedQueryAttention.from_options, "Multi-head attention: every query head has its own K/V head."
)
MultiQueryAttention = preset(
    GroupedQueryAttention.from_options,
    "Multi-query attention: all query heads share one K/V head (the smallest KV cache).",
    num_kv_heads=1,
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
    qk_norm: Annotated[Nested | None, Spec("norm")] = Field(
        None, description="Normalise queries and keys with this norm (Qwen3, Gemma 3: rmsnorm); none by default."
    )
    qk_norm_scope: Literal["head", "projection"] = Field(
        "head", description="head: over each head's head_dim (Qwen3); projection: over the whole q/k (OLMo 2)."
    )
    qk_norm_position: Literal["before_rope", "after_rope"] = Field(
        "before_rope",
        description="Where qk_norm applies: to the projected queries and keys (Qwen3), or after_rope, to each "
        "rotated head (Llama 4's weightless RMSNorm, HunYuan's; scope head only).",
    )
    clip_qkv: float | None = Field(
        None, gt=0, description="Clamp the q, k and v projections to ±clip_qkv before anything else (DBRX: 8)."
    )
    temperature_floor_scale: int | None = Field(
        None,
        ge=1,
        description="Llama 4's temperature tuning (its NoPE layers): the query at sequence index i is scaled by "
        "1 + temperature_scale * log1p(floor((i + 1) / temperature_floor_scale)) (Llama 4: 8192); none: off.",
    )
    temperature_scale: float | None = Field(
        None, gt=0, description="The strength of temperature tuning (Llama 4's attn_scale: 0.1); with its floor."
    )
    sinks: bool = Field(
        False,
        description="A learned logit per query head that joins every softmax denominator, its value zero, so a "
        "query may attend to nothing (gpt-oss's attention sinks).",
    )
    window: int | None = Field(
        None,
        ge=1,
        description="Sliding window: each query sees the `window` most recent keys, itself included (Mistral 7B: "
        "4096), and decoding caches only those; default every key.",
    )
    chunk_size: int | None = Field(
        None,
        ge=1,
        description="Chunked local attention (Llama 4: 8192): positions fall into chunks of this many, and a query "
        "sees the keys of its own chunk only (causal: up to itself); decoding caches chunk_size keys.",
    )
    rotary: Annotated[Nested | None, Spec("positional")] = Field(
        None,
        description="This layer's own rotary encoding instead of the stack's rope (Gemma 3's local layers: "
        "{type: rope, theta: 10000.0}; {type: none}: no rotation, a NoPE layer as in SmolLM3 and Llama 4); "
        "in a stack without positions (positional: none) the rotation of this layer alone (Bamba's attention "
        "layers among Mamba-2 mixers); default the stack's.",
    )
    position_bias: Annotated[Nested | None, Spec("positional")] = Field(
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
        {"num_heads": 4, "qk_norm": {"type": "rmsnorm", "affine": False}, "qk_norm_position": "after_rope"},
        {"num_heads": 4, "clip_qkv": 0.3},
        {"num_heads": 4, "window": 3},
        {"num_heads": 4, "chunk_size": 3},
        {"num_heads": 4, "rotary": {"type": "none"}, "temperature_floor_scale": 2, "temperature_scale": 0.5},
        {"num_heads": 4, "sinks": True, "window": 3},
        {"num_heads": 4, "rotary": {"type": "rope", "theta": 100.0}},
        {"num_heads": 4, "rotary": {"type": "none"}},
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
        if self.sinks and self.softcap is not None:
            problems.append(SINKS_AND_SOFTCAP)
        problems += self._option_problems()
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

    def _option_problems(self) -> list[str]:
        """Why the chunks, the q/k norm's position or the temperature do not go with the other options."""
        problems = []
        if self.chunk_size is not None and (self.window is not None or self.sparse_block_size is not None):
            problems.append("chunk_size is a pattern of keys of its own: give it without window or sparse_block_size")
        if self.qk_norm_position == "after_rope" and (self.qk_norm is None or self.qk_norm_scope != "head"):
            problems.append(f"{QK_NORM_AFTER_ROPE}, and a qk_norm")
        if (self.temperature_floor_scale is None) != (self.temperature_scale is None):
            problems.append("temperature tuning needs both temperature_floor_scale and temperature_scale")
        return problems

    def _position_bias_problems(self, ctx: BuildContext) -> list[str]:
        """Why ``position_bias`` cannot bias this attention's scores: not a score-bias encoding, or its own check."""
        config = self.position_bias
        if not isinstance(config, ComponentConfig):
            return []  # an invalid spec: validating the recipe has said why
        if getattr(type(config), "style", None) != "bias":
            return [
                f"position_bias: positional '{config.type}' adds no score bias; give one such as {{type: t5_relative}}"
            ]
        return [f"position_bias: {m}" for m in config.check(ctx)]

    def _rotary_problems(self, ctx: BuildContext) -> list[str]:
        """Why ``rotary`` cannot replace the stack's rotation here: not a rotary encoding, a stack whose positions
        reach the model another way (its positional is neither rope nor none: a layer of a stack without positions
        may rotate on its own), or the encoding's own check at this attention's heads."""
        config = self.rotary
        if not isinstance(config, ComponentConfig):
            return []  # an invalid spec: validating the recipe has said why
        problems = []
        if getattr(type(config), "style", None) not in ("rotate", "none"):  # none: a layer without positions
            problems.append(
                f"rotary: positional '{config.type}' does not rotate queries and keys; give a rotary encoding "
                "such as {type: rope, theta: 10000.0}, or {type: none} for none"
            )
        if ctx.positional not in (None, "rope", "none"):
            problems.append(
                f"rotary replaces the stack's rope in this layer, but the stack's positional is "
                f"'{ctx.positional}'; set positional: {{type: rope}} (or none) or remove rotary"
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
        sinks = H if self.sinks else 0  # one logit per query head
        return Cost(
            params=weights + biases + norms + sinks,
            matmul=weights,
            score_width=H * D,
            kv_width=Hkv * D,
            window=None if ctx.cross else (self.window or self.chunk_size),  # caps the keys scored and cached
            acts=E + 2 * H * D + 2 * Hkv * D + norm_acts,  # input, q, k, v, attention output (and normed q, k)
        )

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Its query heads, the key/value heads that serve them (when fewer) and its head width; a layer with its
        own rotary encoding or position bias shows that one instead of the stack's (``note``)."""
        own = note
        if not ctx.cross:
            for name in ("rotary", "position_bias"):
                config = nested_config(self, name)
                if config is not None:
                    positions = config.label("positional", ctx, getattr(module, name, None))
                    own = positions.title if positions is not None else "no positions (NoPE)"
        skip = SKIP_OPTIONS | {"rotary", "position_bias"}
        return attention_label(self, ctx, note=own, heads=self.num_heads, kv_heads=self.num_kv_heads, skip=skip)


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
        {"num_heads": 4, "num_kv_heads": 2, "head_dim": 6, "sinks": True},  # gpt-oss
    )


class MQAConfig(AttentionConfig):
    type: Literal["mqa"] = "mqa"

    @property
    def num_kv_heads(self) -> int:
        return 1
