"""Mixture of attention heads (MoA): each token routed to top_k of num_experts query/output heads.

Shapes: N batch, L query length, E d_model, X num_experts, K top_k, D head_dim.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import nn

from zoo.cache import CrossKVCache, KVCache
from zoo.components.kernels import Kernel, sdpa
from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.init import residual_output
from zoo.label import Label, attention_label
from zoo.limits import MAX_EXPERTS, MAX_HEAD_DIM

from .base import _Attention, _indivisible, _resolve_head_dim


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
        bias, dropout, scale, kernel, causal, cross: as in :class:`GroupedQueryAttention`.
        aux_loss_coef: weight of the load-balancing loss.
    """

    # LoRA (zoo.lora) may adapt these linears: attribute -> the kind that train.lora.targets selects.
    adaptable: ClassVar[dict[str, str]] = dict.fromkeys(("q_proj", "k_proj", "v_proj", "o_proj"), "attention")

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
        kernel: Kernel = sdpa,
        causal: bool = False,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(dropout=dropout, scale=scale, causal=causal, cross=cross, kernel=kernel)
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
        p = self.dropout if self.training else 0.0
        y = self.kernel(
            q, k, v, mask=mask, bias=bias, causal=self.causal, scale=self.scale, dropout_p=p
        )  # (N, K, L, D)
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

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Its heads as a token sees them (one per chosen expert), the one key/value head and its head width."""
        return attention_label(self, ctx, note=note, heads=self.num_heads, kv_heads=self.num_kv_heads)
