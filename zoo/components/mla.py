r"""Multi-head latent attention (MLA, DeepSeek-V2/V3): keys and values through a small cached latent.

Every token is compressed into one kv latent of ``kv_lora_rank`` features (RMS-normalised) and one rotary
key of ``qk_rope_head_dim`` features shared by all heads; the decoding cache holds only these two. Each
head's key is its own up-projection of the latent (``qk_nope_head_dim``, no position) followed by the
shared rotary key; its value is another up-projection of the latent. Queries are split the same way, the
rotary part rotated by the stack's positional encoding (RoPE over ``qk_rope_head_dim`` dims only)::

    x ─► q_proj, or q_a_proj ─► RMSNorm ─► q_b_proj ─► per head [q_nope | q_rope] ─── rope on q_rope ─┐
    x ─► kv_a_proj ─► [latent | k_rope]                                                               │
           latent ─► RMSNorm ─► (cached) ─► kv_b_proj ─► per head [k_nope | v]                         ▼
           k_rope ─► rope ─► (cached), shared by every head ─────────────────────► k = [k_nope | k_rope]
    softmax(q · k · scale) v  ─► o_proj

Shapes: N batch, L query length, S key length, E d_model, H heads, Dn qk_nope_head_dim, Dr
qk_rope_head_dim, Dv v_head_dim, R kv_lora_rank, Rq q_lora_rank.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.cache import KVCache
from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.hookspecs import hookimpl
from zoo.init import residual_output
from zoo.label import SKIP_OPTIONS, Label, attention_label
from zoo.limits import MAX_HEAD_DIM, MAX_HEADS, MAX_WIDTH
from zoo.tensor_parallel import check_divides, copy_to_ranks

from .kernels import Kernel, sdpa
from .norm import RMSNorm

__all__ = ["MLAConfig", "MultiHeadLatentAttention"]


class MultiHeadLatentAttention(nn.Module):
    """DeepSeek's multi-head latent attention, computed as Hugging Face's ``DeepseekV3Attention`` does.

    The cache (:meth:`new_cache`, a :class:`zoo.cache.KVCache`) stores the normalised latent ``(N, 1, S, R)``
    as its keys and the rotated shared key ``(N, 1, S, Dr)`` as its values: ``R + Dr`` elements per token
    and layer, whatever H (DeepSeek-V3: 576, where its full K/V would take 2 · 128 · 192 = 49,152). Every step
    up-projects the cached latents to per-head keys and values (no weight absorption).

    Args:
        d_model: width E of the input and output.
        num_heads: heads H.
        kv_lora_rank: features R of the kv latent.
        qk_nope_head_dim: features Dn of each head's key and query without position.
        qk_rope_head_dim: features Dr of the rotated part of each query and of the shared rotary key.
        v_head_dim: features Dv of each head's value.
        q_lora_rank: features Rq of the query's own latent (``q_a_proj``, RMSNorm, ``q_b_proj``); None: one
            ``q_proj`` (DeepSeek-V2-Lite).
        bias: biases on ``q_a_proj``, ``kv_a_proj`` and ``o_proj`` (DeepSeek's ``attention_bias``; the other
            projections never have one).
        norm_eps: epsilon of the two latent RMSNorms (DeepSeek: 1e-6, whatever its ``rms_norm_eps``).
        dropout: dropout on the attention weights, in training only.
        scale: score scale; None means ``1 / sqrt(Dn + Dr)`` (DeepSeek-V3 with yarn multiplies that by mscale²).
        kernel: computes the attention from q, k, v (``zoo.components.kernels``); ``zoo.use_kernel`` swaps it.
        causal: a position sees itself and earlier ones only.

    Raises:
        ValueError: ``qk_rope_head_dim`` is odd (RoPE rotates pairs).
    """

    # LoRA (zoo.lora) may adapt these linears: attribute -> the kind that train.lora.targets selects.
    adaptable: ClassVar[dict[str, str]] = dict.fromkeys(
        ("q_proj", "q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "o_proj"), "attention"
    )

    def __init__(
        self,
        d_model: int,
        *,
        num_heads: int,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        q_lora_rank: int | None = None,
        bias: bool = False,
        norm_eps: float = 1e-6,
        dropout: float = 0.0,
        scale: float | None = None,
        kernel: Kernel = sdpa,
        causal: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if qk_rope_head_dim % 2:
            raise ValueError(f"qk_rope_head_dim ({qk_rope_head_dim}) must be even: RoPE rotates pairs of dims")
        self.num_heads = num_heads
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = qk_nope_head_dim
        self.qk_rope_head_dim = qk_rope_head_dim
        self.v_head_dim = v_head_dim
        self.q_lora_rank = q_lora_rank
        self.kernel = kernel  # computes softmax(q·k) v: zoo.components.kernels, swapped by zoo.use_kernel
        self.dropout = dropout
        self.scale = scale
        self.causal = causal
        factory = {"device": device, "dtype": dtype}
        H, qk = num_heads, qk_nope_head_dim + qk_rope_head_dim
        if q_lora_rank is None:
            self.q_proj = nn.Linear(d_model, H * qk, bias=False, **factory)
        else:
            self.q_a_proj = nn.Linear(d_model, q_lora_rank, bias=bias, **factory)
            self.q_a_norm = RMSNorm(q_lora_rank, eps=norm_eps, **factory)
            self.q_b_proj = nn.Linear(q_lora_rank, H * qk, bias=False, **factory)
        self.kv_a_proj = nn.Linear(d_model, kv_lora_rank + qk_rope_head_dim, bias=bias, **factory)
        self.kv_a_norm = RMSNorm(kv_lora_rank, eps=norm_eps, **factory)
        self.kv_b_proj = nn.Linear(kv_lora_rank, H * (qk_nope_head_dim + v_head_dim), bias=False, **factory)
        self.o_proj = residual_output(nn.Linear(H * v_head_dim, d_model, bias=bias, **factory))
        self.tensor_group: Any = None  # the ranks the heads are split over (shard_tensor); None: all here

    def new_cache(self, batch_size: int, max_len: int) -> KVCache:
        """This layer's decoding cache: the latents and rotary keys of up to ``max_len`` positions."""
        return KVCache(max_len)

    def _queries(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (N, L, E) -> queries (N, H, L, Dn + Dr)."""
        n, L, _ = x.shape
        if self.q_lora_rank is None:
            q = self.q_proj(x)
        else:
            q = self.q_b_proj(self.q_a_norm(self.q_a_proj(x)))
        return q.view(n, L, self.num_heads, self.qk_nope_head_dim + self.qk_rope_head_dim).transpose(1, 2)

    def _keys_values(self, latent: torch.Tensor, k_rope: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Latents (N, 1, S, R) and rotary keys (N, 1, S, Dr) -> keys (N, H, S, Dn + Dr), values (N, H, S, Dv)."""
        n, _, s, _ = latent.shape
        kv = self.kv_b_proj(latent).view(n, s, self.num_heads, self.qk_nope_head_dim + self.v_head_dim)
        k_nope, v = kv.transpose(1, 2).split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        k = torch.cat([k_nope, k_rope.expand(-1, self.num_heads, -1, -1)], dim=-1)
        return k, v

    def forward(
        self,
        x: torch.Tensor,
        *,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        pos: Any = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """``x`` (N, L, E) -> (N, L, E), with the arguments of :meth:`GroupedQueryAttention.forward`.

        ``mask`` is boolean (True = may attend), broadcastable to (N, H, L, S) over every key so far;
        ``positions`` (N|1, L) are absolute positions (default: ``arange`` after the cached ones); ``pos``
        is the stack's positional encoding (it rotates the ``qk_rope_head_dim`` part only); ``cache`` comes
        from :meth:`new_cache`. MLA is self-attention only: ``context`` must be None.
        """
        if context is not None:
            raise ValueError("multi-head latent attention is self-attention only; it takes no context")
        n, L, _ = x.shape
        q = self._queries(x)  # (N, H, L, Dn + Dr)
        q_nope, q_rope = q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        latent, k_rope = self.kv_a_proj(x).split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        latent = self.kv_a_norm(latent).unsqueeze(1)  # (N, 1, L, R)
        k_rope = k_rope.unsqueeze(1)  # (N, 1, L, Dr): one rotary key for every head
        if self.tensor_group is not None:  # heads split over ranks: each rank's heads add to the key's gradient
            k_rope = copy_to_ranks(k_rope, self.tensor_group)
        if positions is None:
            start = 0 if cache is None else cache.length  # an int, or a static cache's 0-d tensor
            positions = (start + torch.arange(L, device=x.device))[None]  # (1, L)
        key_positions = positions
        if pos is not None:
            q_rope, k_rope = pos.rotate(q_rope, k_rope, positions)  # before caching, as the keys are rotated
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope, positions)  # (N, 1, S, R), (N, 1, S, Dr)
            key_positions = cache.positions  # (N, S)
            if getattr(cache, "static", False):
                mask = cache.keys_mask(mask, L)  # fixed buffers: the written keys, padding and causality
        k, v = self._keys_values(latent, k_rope)  # (N, H, S, Dn + Dr), (N, H, S, Dv)
        q = torch.cat([q_nope, q_rope], dim=-1)  # (N, H, L, Dn + Dr)
        bias = None if pos is None else pos.score_bias(positions, key_positions)
        p = self.dropout if self.training else 0.0
        y = self.kernel(
            q, k, v, mask=mask, bias=bias, causal=self.causal, scale=self.scale, dropout_p=p
        )  # (N, H, L, Dv)
        return self.o_proj(y.transpose(1, 2).reshape(n, L, self.num_heads * self.v_head_dim))

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the heads split over the ranks. The query and key/value
        up-projections (``q_proj`` or ``q_b_proj``, ``kv_b_proj``) split column-wise, ``o_proj`` row-wise; the
        down-projections, their norms and the shared rotary key stay whole (every rank computes the latents)."""
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        check_divides(f"multi-head latent attention of {self.num_heads} heads", mesh.size(), num_heads=self.num_heads)
        queries = "q_proj" if self.q_lora_rank is None else "q_b_proj"
        plan = {queries: ColwiseParallel(), "kv_b_proj": ColwiseParallel(), "o_proj": RowwiseParallel()}
        parallelize_module(self, mesh, plan)
        self.num_heads //= mesh.size()
        self.tensor_group = mesh.get_group()

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, q_lora_rank={self.q_lora_rank}, kv_lora_rank={self.kv_lora_rank}, "
            f"qk_nope_head_dim={self.qk_nope_head_dim}, qk_rope_head_dim={self.qk_rope_head_dim}, "
            f"v_head_dim={self.v_head_dim}, causal={self.causal}"
        )


class MLAConfig(ComponentConfig):
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    type: Literal["mla"] = "mla"
    supports_cross: ClassVar[bool] = False

    num_heads: int = Field(ge=1, le=MAX_HEADS, description="Attention heads (DeepSeek-V3: 128).")
    q_lora_rank: int | None = Field(
        None, ge=1, le=MAX_WIDTH, description="Query latent width; none: one q_proj (DeepSeek-V3: 1536)."
    )
    kv_lora_rank: int = Field(ge=1, le=MAX_WIDTH, description="Width of the cached kv latent (DeepSeek-V3: 512).")
    qk_nope_head_dim: int = Field(ge=1, le=MAX_HEAD_DIM, description="Per-head query/key dims without RoPE (128).")
    qk_rope_head_dim: int = Field(
        ge=2, le=MAX_HEAD_DIM, description="Per-head query dims and shared key dims that RoPE rotates (64)."
    )
    v_head_dim: int = Field(ge=1, le=MAX_HEAD_DIM, description="Per-head value dims (DeepSeek-V3: 128).")
    bias: bool = Field(False, description="Biases on q_a_proj, kv_a_proj and o_proj (DeepSeek's attention_bias).")
    norm_eps: float = Field(1e-6, gt=0, description="Epsilon of the RMSNorms on the q and kv latents.")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the attention weights (training).")
    scale: float | None = Field(
        None, gt=0, description="Score scale; default 1/sqrt(qk_nope_head_dim + qk_rope_head_dim) (yarn: × mscale²)."
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_heads": 4, "kv_lora_rank": 8, "qk_nope_head_dim": 6, "qk_rope_head_dim": 4, "v_head_dim": 5},
        {
            "num_heads": 2,
            "q_lora_rank": 12,
            "kv_lora_rank": 10,
            "qk_nope_head_dim": 4,
            "qk_rope_head_dim": 8,
            "v_head_dim": 6,
            "bias": True,
            "scale": 0.3,
        },
    )

    def head_dim_for(self, d_model: int) -> int:
        """The head width the stack's positional encoding works on: the rotated ``qk_rope_head_dim``."""
        return self.qk_rope_head_dim

    def check(self, ctx: BuildContext) -> list[str]:
        if self.qk_rope_head_dim % 2:
            return [f"qk_rope_head_dim ({self.qk_rope_head_dim}) must be even: RoPE rotates pairs of dims"]
        return []

    def cost(self, ctx: BuildContext) -> Cost:
        E, H = ctx.d_model, self.num_heads
        Dn, Dr, Dv, R, Rq = (
            self.qk_nope_head_dim,
            self.qk_rope_head_dim,
            self.v_head_dim,
            self.kv_lora_rank,
            self.q_lora_rank,
        )
        qk = Dn + Dr
        q_weights = E * H * qk if Rq is None else E * Rq + Rq * H * qk
        weights = q_weights + E * (R + Dr) + R * H * (Dn + Dv) + H * Dv * E
        biases = self.bias * ((Rq or 0) + R + Dr + E)  # q_a_proj (if any), kv_a_proj, o_proj
        norms = R + (Rq or 0)  # the RMSNorm scales of the kv (and q) latents
        return Cost(
            params=weights + biases + norms,
            matmul=weights,
            # Scores take H·(Dn + Dr) per key and the weighted values H·Dv: 2·2·L·score_width FLOPs in all.
            score_width=H * (qk + Dv) // 2,
            cache_width=R + Dr,  # the latent and the one rotary key, not per-head K and V
            acts=E + 2 * (Rq or 0) + H * qk + (R + Dr) + R + H * (Dn + Dv) + H * qk + H * Dv,
        )

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Its heads, their query/key widths (the part the rotary encoding turns as well) and value width, and the
        widths of its latents."""
        Dn, Dr, Dv = self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim
        widths = f"qk {Dn} + {Dr} rotated, v {Dv}"
        latents = f"kv latent {self.kv_lora_rank}" + (f", q latent {self.q_lora_rank}" if self.q_lora_rank else "")
        skip = SKIP_OPTIONS | {"qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank", "q_lora_rank"}
        label = attention_label(self, ctx, note=note, heads=self.num_heads, head_widths=widths, skip=skip)
        label.lines.insert(1, latents)
        return label


@hookimpl
def register_components(register):
    register("attention", "mla", MultiHeadLatentAttention, MLAConfig)
