"""``deberta_relative``: DeBERTa's table of relative-position embeddings, shared by every disentangled attention.

The table holds ``2 * span`` vectors of d_model features, one per (bucketed) distance ``query - key`` from
``-span`` to ``span - 1``; an optional LayerNorm (HF's ``norm_rel_ebd: layer_norm``) normalises it before each use.
It adds nothing to the scores by itself: the disentangled attention (``zoo.components.attention.disentangled``)
reads it, projects it with its own keys' and queries' projections and scores content against position (c2p)
and position against content (p2c). With ``absolute`` the model also adds a learned vector per absolute position
to its input (HF's ``position_biased_input``), at ``max_len`` rows.

Distances up to ``position_buckets / 2`` get a bucket each; longer ones share log-spaced buckets up to
``max_relative_positions`` (``deberta_bucket``, transformers' ``make_log_bucket_position``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.config import BuildContext
from zoo.cost import Cost
from zoo.label import Label
from zoo.limits import MAX_POSITIONS

from .base import PositionalConfig, PositionalEncoding


def deberta_bucket(relative: torch.Tensor, buckets: int, max_position: int) -> torch.Tensor:
    """DeBERTa's bucket of each distance ``relative = query - key`` (long, same shape): distances below
    ``buckets // 2`` as they are, longer ones on a log scale up to ``max_position``, keeping their sign.
    Computed in float32 as transformers' ``make_log_bucket_position`` computes it, so the buckets are the same."""
    sign = torch.sign(relative)
    mid = buckets // 2
    far = torch.where((relative < mid) & (relative > -mid), torch.full_like(relative, mid - 1), relative.abs())
    steps = torch.log(far / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)
    log_pos = torch.ceil(steps) + mid
    return torch.where(far <= mid, relative.to(log_pos.dtype), log_pos * sign).long()


def relative_span(position_buckets: int, max_relative_positions: int) -> int:
    """Half the rows of the table: the buckets if bucketed, else the largest distance."""
    return position_buckets if position_buckets > 0 else max_relative_positions


class DebertaRelativeEmbedding(PositionalEncoding):
    """The ``rel_embeddings`` table (2·span, E) and its optional ``norm``; with ``absolute``, a learned table of
    ``max_len`` absolute positions (``embedding``) added to the input.

    ``table()`` is the (normalised) table; ``index(q_pos, k_pos)`` the row each query/key pair reads:
    ``clamp(bucket(q_pos - k_pos) + span, 0, 2·span - 1)`` of shape (N|1, L, S).
    """

    def __init__(
        self,
        d_model: int,
        *,
        max_len: int,
        position_buckets: int = 0,
        max_relative_positions: int | None = None,
        norm: bool = True,
        eps: float = 1e-7,
        absolute: bool = False,
        init_std: float = 0.02,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.max_relative_positions = max_relative_positions or max_len
        self.position_buckets = position_buckets
        self.span = relative_span(position_buckets, self.max_relative_positions)
        self.init_std = init_std
        self.rel_embeddings = nn.Embedding(2 * self.span, d_model, **factory)
        self.norm = nn.LayerNorm(d_model, eps=eps, **factory) if norm else None
        self.embedding = nn.Embedding(max_len, d_model, **factory) if absolute else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # transformers' DeBERTa: embeddings from N(0, initializer_range), the norm at ones and zeros.
        for table in (self.rel_embeddings, self.embedding):
            if table is not None:
                nn.init.normal_(table.weight, std=self.init_std)
        if self.norm is not None:
            self.norm.reset_parameters()

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x if self.embedding is None else x + self.embedding(positions)  # (N, L, E)

    def table(self) -> torch.Tensor:
        """The relative embeddings (2·span, E), normalised where the table has a norm."""
        weight = self.rel_embeddings.weight
        return weight if self.norm is None else self.norm(weight)

    def index(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """The table row of each query (N|1, L) and key (N|1, S) position: (N|1, L, S), long."""
        relative = q_pos[:, :, None] - k_pos[:, None, :]  # (N|1, L, S)
        if self.position_buckets > 0:
            relative = deberta_bucket(relative, self.position_buckets, self.max_relative_positions)
        return (relative + self.span).clamp(0, 2 * self.span - 1)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): every rank holds the whole table (it is projected by each
        rank's own heads)."""

    def extra_repr(self) -> str:
        return f"span={self.span}, position_buckets={self.position_buckets}, absolute={self.embedding is not None}"


class DebertaRelativeConfig(PositionalConfig):
    type: Literal["deberta_relative"] = "deberta_relative"
    style: ClassVar[str] = "embed"  # to other attentions: the absolute positions, if any (the table is unread)

    position_buckets: int = Field(
        0,
        ge=0,
        le=MAX_POSITIONS,
        description="Buckets of relative distance on each side (DeBERTa-v3: 256), log-spaced past half of them; "
        "default 0: no buckets, one row per distance up to max_relative_positions (HF's -1).",
    )
    max_relative_positions: int | None = Field(
        None,
        ge=1,
        le=MAX_POSITIONS,
        description="The largest distance the buckets reach (or, without buckets, the rows on each side); default "
        "max_len (HF's -1).",
    )
    norm: bool = Field(True, description="A LayerNorm over the table before each use (HF's norm_rel_ebd: layer_norm).")
    eps: float = Field(1e-7, gt=0, description="The table norm's epsilon (HF's layer_norm_eps).")
    absolute: bool = Field(
        False,
        description="Also add a learned vector per absolute position to the input, max_len rows (HF's "
        "position_biased_input).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"position_buckets": 4, "max_relative_positions": 16},
        {"position_buckets": 0, "max_relative_positions": 8, "norm": False, "absolute": True},
    )

    @property
    def bounded_by_max_len(self) -> bool:  # type: ignore[override]
        """Absolute positions have rows below ``max_len`` only; relative ones reach any length."""
        return self.absolute

    def span(self, ctx: BuildContext) -> int:
        return relative_span(self.position_buckets, self.max_relative_positions or ctx.max_len)

    def check(self, ctx: BuildContext) -> list[str]:
        problems = []
        if self.max_relative_positions is None and ctx.max_len < 2:
            problems.append(f"deberta_relative needs max_len >= 2 or max_relative_positions, got max_len {ctx.max_len}")
        if self.position_buckets == 1:
            problems.append("position_buckets must be 0 (none) or >= 2, got 1")
        reach = self.max_relative_positions or ctx.max_len
        if self.position_buckets > 1 and reach - 1 <= self.position_buckets // 2:
            problems.append(
                f"max_relative_positions ({reach}) must exceed position_buckets // 2 + 1 "
                f"({self.position_buckets // 2 + 1}): the log-spaced buckets reach from there to it"
            )
        if self.absolute and ctx.max_len < 1:
            problems.append(f"absolute positions need max_len >= 1, got {ctx.max_len}")
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        E = ctx.d_model
        absolute = ctx.max_len * E if self.absolute else 0
        return Cost(params=2 * self.span(ctx) * E + (2 * E if self.norm else 0) + absolute)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Shown inside every self-attention."""
        buckets = f"{self.position_buckets} log buckets" if self.position_buckets else "no buckets"
        reach = self.max_relative_positions or ctx.max_len
        title = f"DeBERTa relative table: {2 * self.span(ctx)} × {ctx.d_model}, {buckets}, reach {reach}"
        return Label("positional", title + (", + absolute positions" if self.absolute else ""))
