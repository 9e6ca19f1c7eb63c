"""``t5_global_relative``: T5's relative bias, and in a bidirectional stack a second table of the same buckets for
LongT5's global tokens (transient-global attention, ``zoo.components.attention.local``).

A token's bias towards global token ``g`` (the aggregate of the ``g``-th block of ``global_block_size`` tokens) is
the bucket of ``g - b``, ``b`` the block of the token itself, looked up in ``global_relative_attention_bias``. LongT5
holds both tables in its encoder's first layer and reuses them in the others: one encoding per stack, as zoo's T5.
In a causal stack (LongT5's decoder) it is ``t5_relative``, with no second table.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import nn

from zoo.config import BuildContext
from zoo.cost import Cost
from zoo.label import Label

from .t5_relative import T5RelativeBias, T5RelativeConfig, relative_position_bucket


class T5GlobalRelativeBias(T5RelativeBias):
    """``T5RelativeBias`` with ``global_relative_attention_bias`` (num_buckets, num_heads) in a bidirectional stack:
    the bias of each token towards each global token, by the bucket of their distance in blocks."""

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
        super().__init__(
            d_model,
            num_heads=num_heads,
            num_buckets=num_buckets,
            max_distance=max_distance,
            causal=causal,
            device=device,
            dtype=dtype,
        )
        table = None if causal else nn.Embedding(num_buckets, num_heads, device=device, dtype=dtype)
        self.global_relative_attention_bias = table
        self.reset_parameters()

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if getattr(self, "global_relative_attention_bias", None) is not None:  # LongT5's std, d_model^-0.5
            nn.init.normal_(self.global_relative_attention_bias.weight, std=self.d_model**-0.5)

    def global_bias(self, distance: torch.Tensor) -> torch.Tensor:
        """The bias (N, H, L, G) of ``distance`` (N, L, G), long: each global token's block minus the query's."""
        if self.global_relative_attention_bias is None:
            raise ValueError("t5_global_relative has no global table in a causal stack (LongT5's decoder)")
        buckets = relative_position_bucket(
            distance, bidirectional=True, num_buckets=self.num_buckets, max_distance=self.max_distance
        )
        return self.global_relative_attention_bias(buckets).permute(0, 3, 1, 2)  # (N, L, G, H) -> (N, H, L, G)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism: both tables split by heads, as the attention's heads split."""
        super().shard_tensor(mesh)
        if self.global_relative_attention_bias is not None:
            from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

            parallelize_module(self, mesh, {"global_relative_attention_bias": ColwiseParallel()})


class T5GlobalRelativeConfig(T5RelativeConfig):
    """T5's relative bias plus LongT5's bias towards global tokens (its transient-global encoder)."""

    type: Literal["t5_global_relative"] = "t5_global_relative"

    def cost(self, ctx: BuildContext) -> Cost:
        tables = 1 if ctx.causal else 2  # a causal stack has no global tokens
        return Cost(params=tables * self.num_buckets * ctx.num_heads)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        words = f"T5 relative bias: {self.num_buckets} buckets, max distance {self.max_distance}"
        return Label("positional", words if ctx.causal else f"{words}; a second table towards the global tokens")
