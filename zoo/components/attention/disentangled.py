"""Disentangled attention (DeBERTa): content and relative position scored separately, then summed.

A query at ``i`` and a key at ``j`` score ``(c2c + c2p + p2c) / sqrt(D * (1 + terms))``::

    c2c = q_i · k_j                       content to content (plain attention)
    c2p = q_i · Pk[r(i, j)]               content to position: the query against the key's distance
    p2c = k_j · Pq[r(i, j)]               position to content: the key against the query's distance

where ``r(i, j)`` is the row of the bucketed distance ``i - j`` in the relative table (``positional:
deberta_relative``, shared by every layer as in DeBERTa), and ``Pk`` / ``Pq`` are that table projected by this
layer's own key and query projections (``share_att_key``: DeBERTa-v3) or by projections of its own
(``pos_key_proj``, ``pos_query_proj``). ``pos_att_type`` picks the terms; each one joins the scale.

The table is the stack's ``pos`` (a ``deberta_relative`` encoding), or this layer's own (``relative``). Encoders
only: bidirectional self-attention, as DeBERTa's.

Shapes: N batch, L query length, S key length (= L), E d_model, H heads, D head_dim, R = 2 * span table rows.
"""

from __future__ import annotations

from collections.abc import Callable
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

from .base import _Attention, _indivisible, _resolve_head_dim

TERMS = ("c2p", "p2c")
NO_TABLE = (
    "pos_att_type {terms} reads DeBERTa's relative table: set the stack's positional: {{type: deberta_relative}} "
    "(one table for every layer, as DeBERTa's) or this attention's relative: {{type: deberta_relative}}"
)


class DisentangledAttention(_Attention):
    """DeBERTa's disentangled self-attention: multi-head attention whose scores add content-to-position (c2p)
    and position-to-content (p2c) terms read from a relative-position table (module docstring).

    Args:
        d_model: width E of the input and output.
        num_heads: heads H.
        head_dim: features per head D; None means ``d_model // num_heads``.
        pos_att_type: the position terms, any of ``c2p`` and ``p2c``; none: content only.
        share_att_key: project the table with this layer's query and key projections (DeBERTa-v3); else with
            ``pos_key_proj`` (c2p) and ``pos_query_proj`` (p2c) of its own.
        relative: builds this layer's own table (a ``DebertaRelativeEmbedding``); None: the stack's ``pos``.
        scale: score scale; None means ``1 / sqrt(D * (1 + len(pos_att_type)))``.
        bias: biases in every projection (DeBERTa's).
        kernel, dropout: the attention kernel and the dropout on its weights.
    """

    adaptable: ClassVar[dict[str, str]] = dict.fromkeys(("q_proj", "k_proj", "v_proj", "o_proj"), "attention")

    def __init__(
        self,
        d_model: int,
        *,
        num_heads: int,
        head_dim: int | None = None,
        pos_att_type: tuple[str, ...] | list[str] = TERMS,
        share_att_key: bool = True,
        relative: Callable[[], nn.Module] | None = None,
        scale: float | None = None,
        bias: bool = True,
        kernel: Kernel = sdpa,
        dropout: float = 0.0,
        causal: bool = False,
        cross: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        if causal or cross:
            raise ValueError(
                "disentangled attention is an encoder's bidirectional self-attention (not causal, not cross)"
            )
        unknown = sorted(set(pos_att_type) - set(TERMS))
        if unknown:
            raise ValueError(f"pos_att_type {unknown}: the terms are c2p and p2c")
        head_dim = _resolve_head_dim(d_model, num_heads, head_dim, "num_heads")
        terms = tuple(t for t in TERMS if t in pos_att_type)
        default_scale = (head_dim * (1 + len(terms))) ** -0.5  # DeBERTa's: each term joins the scale
        super().__init__(kernel=kernel, scale=default_scale if scale is None else scale, dropout=dropout)
        self.num_heads = self.num_kv_heads = num_heads
        self.head_dim = head_dim
        self.terms = terms
        factory = {"device": device, "dtype": dtype}
        width = num_heads * self.head_dim
        self.q_proj = nn.Linear(d_model, width, bias=bias, **factory)
        self.k_proj = nn.Linear(d_model, width, bias=bias, **factory)
        self.v_proj = nn.Linear(d_model, width, bias=bias, **factory)
        self.o_proj = residual_output(nn.Linear(width, d_model, bias=bias, **factory))
        self.share_att_key = share_att_key
        own = not share_att_key
        self.pos_key_proj = nn.Linear(d_model, width, bias=bias, **factory) if own and "c2p" in self.terms else None
        self.pos_query_proj = nn.Linear(d_model, width, bias=bias, **factory) if own and "p2c" in self.terms else None
        self.relative = relative() if relative is not None and self.terms else None

    def _table_heads(self, proj: nn.Linear, table: torch.Tensor) -> torch.Tensor:
        """The table (R, E) projected and split into heads: (H, R, D)."""
        return proj(table).view(table.size(0), self.num_heads, self.head_dim).transpose(0, 1)

    def position_scores(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, pos: Any) -> torch.Tensor:
        """The c2p + p2c terms, unscaled, (N, H, L, S), for q (N, H, L, D) and k (N, H, S, D) at ``positions``."""
        source = self.relative if self.relative is not None else pos
        if not hasattr(source, "index"):
            raise ValueError(NO_TABLE.format(terms=list(self.terms)))
        table = source.table()  # (R, E), normalised
        index = source.index(positions, positions)  # (N|1, L, S): the table row of each pair
        n, h, L, S = q.size(0), q.size(1), q.size(2), k.size(2)
        scores = q.new_zeros(())
        if "c2p" in self.terms:
            pos_key = self._table_heads(self.k_proj if self.share_att_key else self.pos_key_proj, table)  # (H, R, D)
            c2p = q @ pos_key.transpose(-1, -2)  # (N, H, L, R)
            scores = scores + c2p.gather(-1, index[:, None].expand(n, h, L, S))
        if "p2c" in self.terms:
            pos_query = self._table_heads(self.q_proj if self.share_att_key else self.pos_query_proj, table)
            p2c = k @ pos_query.transpose(-1, -2)  # (N, H, S, R): each key against every distance
            rows = index.transpose(-1, -2)[:, None].expand(n, h, S, L)  # key j, query i: row r(i, j)
            scores = scores + p2c.gather(-1, rows).transpose(-1, -2)
        return scores

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
        """``x`` (N, L, E) -> (N, L, E); ``mask`` boolean (True = may attend), broadcastable to (N, H, L, S);
        ``positions`` (N|1, L), default ``0 .. L-1``; ``pos`` the stack's positional encoding. No cache: an
        encoder's attention does not decode."""
        if cache is not None:
            raise ValueError("disentangled attention is an encoder's: it keeps no decoding cache")
        n, L, _ = x.shape
        q = self._heads(self.q_proj, x, self.num_heads)  # (N, H, L, D)
        k, v = self._heads(self.k_proj, x, self.num_heads), self._heads(self.v_proj, x, self.num_heads)
        bias = None
        if self.terms:
            if positions is None:
                positions = torch.arange(L, device=x.device)[None]  # (1, L)
            bias = self.position_scores(q, k, positions, pos) * self.scale  # (N, H, L, S)
        p = self.dropout if self.training else 0.0
        y = self.kernel(q, k, v, mask=mask, bias=bias, causal=False, scale=self.scale, dropout_p=p)  # (N, H, L, D)
        return self.o_proj(y.transpose(1, 2).reshape(n, L, self.num_heads * self.head_dim))

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, head_dim={self.head_dim}, pos_att_type={list(self.terms)}, "
            f"share_att_key={self.share_att_key}"
        )


class DisentangledConfig(ComponentConfig):
    """DeBERTa's disentangled attention (``zoo.components.attention.disentangled``)."""

    type: Literal["disentangled"] = "disentangled"
    supports_cross: ClassVar[bool] = False
    positional_styles: ClassVar[frozenset[str]] = frozenset({"embed", "none"})

    num_heads: int = Field(ge=1, le=MAX_HEADS, description="Heads.")
    head_dim: int | None = Field(
        None, ge=1, le=MAX_HEAD_DIM, description="Features per head; default d_model // num_heads."
    )
    pos_att_type: tuple[Literal["c2p", "p2c"], ...] = Field(
        TERMS,
        description="The position terms added to the content scores: c2p (content to position), p2c (position to "
        "content); DeBERTa-v3: both; empty: content only.",
    )
    share_att_key: bool = Field(
        True,
        description="Project the relative table with the layer's own key and query projections (DeBERTa-v3); "
        "false: with pos_key_proj and pos_query_proj of its own.",
    )
    relative: Annotated[Nested | None, Spec("positional")] = Field(
        None,
        description="This layer's own relative table ({type: deberta_relative}); default the stack's positional, "
        "shared by every layer as in DeBERTa.",
    )
    bias: bool = Field(True, description="Biases in every projection (DeBERTa's).")
    scale: float | None = Field(
        None, gt=0, description="Score scale; default 1/sqrt(head_dim * (1 + the position terms)), DeBERTa's."
    )
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the attention weights (training).")

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_heads": 4, "pos_att_type": []},
        {"num_heads": 4, "relative": {"type": "deberta_relative", "position_buckets": 4, "max_relative_positions": 8}},
        {
            "num_heads": 4,
            "head_dim": 6,
            "pos_att_type": ["c2p"],
            "share_att_key": False,
            "relative": {"type": "deberta_relative", "position_buckets": 0, "max_relative_positions": 5},
        },
        {
            "num_heads": 2,
            "pos_att_type": ["p2c"],
            "share_att_key": False,
            "relative": {"type": "deberta_relative", "norm": False},
        },
    )

    def head_dim_for(self, d_model: int) -> int:
        """The head width this config gives in a model of width ``d_model``."""
        return self.head_dim if self.head_dim is not None else d_model // self.num_heads

    @property
    def num_kv_heads(self) -> int:
        return self.num_heads

    def check(self, ctx: BuildContext) -> list[str]:
        problems = []
        if self.head_dim is None and ctx.d_model % self.num_heads:
            problems.append(_indivisible(ctx.d_model, self.num_heads, "num_heads"))
        if ctx.causal or ctx.cross:
            problems.append(
                "disentangled attention is DeBERTa's bidirectional self-attention: it needs an encoder stack "
                "(architecture: encoder), not a causal or cross-attention"
            )
        if len(set(self.pos_att_type)) != len(self.pos_att_type):
            problems.append(f"pos_att_type {list(self.pos_att_type)} names a term twice")
        own = self.relative if isinstance(self.relative, ComponentConfig) else None  # else: validation said why
        if self.pos_att_type and self.relative is None and ctx.positional != "deberta_relative":
            problems.append(NO_TABLE.format(terms=list(self.pos_att_type)))
        if own is not None:
            if own.type != "deberta_relative":
                problems.append(f"relative: positional '{own.type}' is not a relative table; give deberta_relative")
            elif getattr(own, "absolute", False):
                problems.append("relative: a layer's own table adds no absolute positions; set absolute: false")
            else:
                problems += [f"relative: {m}" for m in own.check(ctx)]
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        # q, k, v, o as in multi-head attention (4·E·H·D + biases), plus a projection of the table per term
        # without share_att_key. The position terms (projecting the R table rows, scoring L queries or keys
        # against them) are per sequence, not weights each token meets: left out of matmul.
        E, H, D = ctx.d_model, self.num_heads, self.head_dim_for(ctx.d_model)
        projections = 4 + (0 if self.share_att_key else len(self.pos_att_type))
        weights = projections * E * H * D
        biases = (projections - 1) * H * D + E if self.bias else 0
        own = nested_config(self, "relative")
        table = 0 if own is None or not self.pos_att_type else nested_cost("positional", own, ctx).params
        return Cost(
            params=weights + biases + table,
            matmul=4 * E * H * D,
            score_width=H * D,
            kv_width=H * D,
            acts=E + 4 * H * D + len(self.pos_att_type) * H * D,
        )

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Its heads and position terms; the relative table it reads (its own or the stack's, ``note``)."""
        terms = " + ".join(("c2c", *self.pos_att_type))
        keys = "the layer's q/k projections" if self.share_att_key else "projections of its own"
        own = nested_config(self, "relative")
        table = own.label("positional", ctx, getattr(module, "relative", None)) if own is not None else None
        words = f"disentangled: {terms}, scaled 1/sqrt({1 + len(self.pos_att_type)}·D)"
        if self.pos_att_type:
            words += f"; relative table through {keys}"
        shown = table.title if table is not None else note
        skip = SKIP_OPTIONS | {"relative", "pos_att_type", "share_att_key"}
        return attention_label(self, ctx, note=f"{words}; {shown}" if shown else words, heads=self.num_heads, skip=skip)
