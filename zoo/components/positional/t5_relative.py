"""``t5_relative``: T5's learned bias per bucket of relative position and head, added to attention scores."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.config import BuildContext
from zoo.cost import Cost
from zoo.label import Label
from zoo.limits import MAX_POSITIONS
from zoo.tensor_parallel import check_divides

from .base import PositionalConfig, PositionalEncoding


def relative_position_bucket(
    relative_position: torch.Tensor, *, bidirectional: bool, num_buckets: int = 32, max_distance: int = 128
) -> torch.Tensor:
    """T5's bucket of each ``relative_position = key_position - query_position`` (same shape, long).

    Bidirectional: half the buckets for keys after the query, half for the rest. Causal: keys after the
    query all fall in bucket 0. Within a direction, distances below half the buckets get a bucket each;
    longer ones share log-spaced buckets up to ``max_distance``, and everything beyond it shares the last.
    Identical to ``T5Attention._relative_position_bucket`` of Hugging Face, so T5 weights import as they are.
    """
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # clamp(min=1) only keeps log(0) out of the small branch that torch.where discards anyway.
    log_ratio = torch.log(distance.clamp(min=1).float() / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (num_buckets - max_exact)).long()
    large = large.clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


def t5_bucket_problem(num_buckets: int, max_distance: int, causal: bool) -> str | None:
    """Why T5 buckets cannot be laid out with these settings, or None when they can."""
    per_direction = num_buckets if causal else num_buckets // 2
    max_exact = per_direction // 2
    if max_exact < 1:
        return f"t5_relative needs num_buckets >= {2 if causal else 4} (causal {causal}), got {num_buckets}"
    if max_distance <= max_exact:
        return (
            f"t5_relative max_distance ({max_distance}) must exceed the {max_exact} exact buckets "
            f"(num_buckets {num_buckets}, causal {causal})"
        )
    return None


class T5RelativeBias(PositionalEncoding):
    """T5's learned relative position bias: one scalar per (bucket of k_pos - q_pos, head), added to scores.

    The table ``relative_attention_bias`` (num_buckets, num_heads) is the only parameter; a stack shares
    it across its layers, as T5 does (computed in the first layer, reused by the rest).
    """

    def __init__(
        self,
        d_model: int,
        *,
        num_heads: int,
        num_buckets: int = 32,
        max_distance: int = 128,
        causal: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        problem = t5_bucket_problem(num_buckets, max_distance, causal)
        if problem:
            raise ValueError(problem)
        self.d_model = d_model
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = not causal
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads, device=device, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # T5's initialisation of this table (std d_model^-0.5).
        nn.init.normal_(self.relative_attention_bias.weight, std=self.d_model**-0.5)

    def score_bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        relative = k_pos[:, None, :] - q_pos[:, :, None]  # (N|1, L, S)
        buckets = relative_position_bucket(
            relative,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        return self.relative_attention_bias(buckets).permute(0, 3, 1, 2)  # (N|1, L, S, H) -> (N|1, H, L, S)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the heads split over the ranks, as the attention's do: each
        rank holds the table's columns of its own heads and biases its own heads' scores."""
        from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

        heads = self.relative_attention_bias.embedding_dim
        check_divides("T5 relative bias", mesh.size(), num_heads=heads)
        parallelize_module(self, mesh, {"relative_attention_bias": ColwiseParallel()})


class T5RelativeConfig(PositionalConfig):
    type: Literal["t5_relative"] = "t5_relative"
    style: ClassVar[str] = "bias"
    num_buckets: int = Field(
        32, ge=2, le=MAX_POSITIONS, description="Buckets of relative position (split in two if bidirectional)."
    )
    max_distance: int = Field(128, ge=2, le=MAX_POSITIONS, description="Distances from here on share the last bucket.")

    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, {"num_buckets": 8, "max_distance": 6})

    def check(self, ctx: BuildContext) -> list[str]:
        problem = t5_bucket_problem(self.num_buckets, self.max_distance, ctx.causal)
        return [problem] if problem else []

    def cost(self, ctx: BuildContext) -> Cost:
        return Cost(params=self.num_buckets * ctx.num_heads)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Shown inside every self-attention."""
        return Label("positional", f"T5 relative bias: {self.num_buckets} buckets, max distance {self.max_distance}")
