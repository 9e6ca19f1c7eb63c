"""``learned_relative``: learned absolute positions added to the input AND T5's relative bias added to every
attention's scores (MPNet): the ``learned`` table and the ``t5_relative`` buckets of one stack, in one module."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field

from zoo.config import BuildContext
from zoo.cost import Cost
from zoo.label import Label

from .base import PositionalEncoding, positions_for
from .learned import LearnedConfig, LearnedEncoding
from .t5_relative import T5RelativeBias, T5RelativeConfig


class LearnedRelativeEncoding(PositionalEncoding):
    """``absolute`` (a :class:`LearnedEncoding`) embeds the positions; ``relative`` (a :class:`T5RelativeBias`,
    shared by all layers) biases the scores by buckets of ``key - query``.

    ``relative_to="positions"``: the bias reads the positions the embedding reads (learned plus t5_relative,
    applied separately). ``"index"``: each token's index in the sequence, 0 .. L-1, every token counted, whatever
    positions the embedding reads, as MPNet does (its bias never sees the positions numbered past the padding);
    encoders only.
    """

    def __init__(
        self,
        d_model: int,
        *,
        num_heads: int,
        max_len: int,
        offset: int = 0,
        padding_idx: int | None = None,
        sinusoidal_init: bool = False,
        num_buckets: int = 32,
        max_distance: int = 128,
        relative_to: Literal["positions", "index"] = "positions",
        causal: bool = False,
        init_std: float = 0.02,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if relative_to == "index" and causal:
            raise ValueError("relative_to='index' counts a whole sequence's tokens: an encoder's (not causal)")
        factory = dict(device=device, dtype=dtype)
        self.absolute = LearnedEncoding(
            d_model,
            max_len=max_len,
            offset=offset,
            padding_idx=padding_idx,
            sinusoidal_init=sinusoidal_init,
            init_std=init_std,
            **factory,
        )
        self.relative = T5RelativeBias(
            d_model, num_heads=num_heads, num_buckets=num_buckets, max_distance=max_distance, causal=causal, **factory
        )
        self.by_index = relative_to == "index"

    def reset_parameters(self) -> None:
        self.absolute.reset_parameters()  # N(0, init_std), or the sinusoids
        self.relative.reset_parameters()  # T5's N(0, d_model^-0.5)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): the table whole on every rank, the bias by heads."""
        self.absolute.shard_tensor(mesh)
        self.relative.shard_tensor(mesh)

    def positions_from_ids(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        return self.absolute.positions_from_ids(input_ids)

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.absolute.embed(x, positions)

    def score_bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        if self.by_index:  # (1, L) and (1, S): the sequence's indices
            q_pos = positions_for(q_pos.shape[-1], device=q_pos.device)
            k_pos = positions_for(k_pos.shape[-1], device=k_pos.device)
        return self.relative.score_bias(q_pos, k_pos)


class LearnedRelativeConfig(LearnedConfig, T5RelativeConfig):
    """``learned``'s fields (``offset``, ``padding_idx``, ``sinusoidal_init``) and ``t5_relative``'s
    (``num_buckets``, ``max_distance``), and where the bias counts from."""

    bounded_by_max_len: ClassVar[bool] = True
    style: ClassVar[str] = "bias"  # the scores' bias: an attention must apply one (the embedding needs nothing)

    type: Literal["learned_relative"] = "learned_relative"  # type: ignore[assignment]
    relative_to: Literal["positions", "index"] = Field(
        "positions",
        description="What the bias's relative positions count: the positions the embedding reads, or each "
        "token's index in the sequence, padding counted (MPNet's; encoders only).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"offset": 2, "padding_idx": 1, "relative_to": "index"},
        {"num_buckets": 8, "max_distance": 16, "offset": 2},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        problems = LearnedConfig.check(self, ctx) + T5RelativeConfig.check(self, ctx)
        if self.relative_to == "index" and ctx.causal:
            problems.append(
                "relative_to 'index' counts a whole sequence's tokens: an encoder's (architecture: encoder)"
            )
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        return Cost(params=LearnedConfig.cost(self, ctx).params + T5RelativeConfig.cost(self, ctx).params)

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Shown inside every self-attention, the table with it."""
        table = f"{ctx.max_len + self.offset} × {ctx.d_model}"
        return Label(
            "positional",
            f"learned positions ({table}) + T5 relative bias: {self.num_buckets} buckets, max distance "
            f"{self.max_distance}",
        )
