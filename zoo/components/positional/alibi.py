"""``alibi``: attention with linear biases, a per-head penalty proportional to the query-key distance."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch

from zoo.config import BuildContext
from zoo.label import Label

from .base import PositionalConfig, PositionalEncoding


def alibi_slopes(num_heads: int) -> list[float]:
    """Per-head ALiBi slopes (Press et al.): for n heads, a power of two, ``2^(-8/n)`` raised to 1..n.

    For other n, the slopes of the largest power of two p < n, followed by every other slope of 2p until
    there are n (the rule of the paper's code and BLOOM), so extra heads fall between the existing ones.
    """

    def geometric(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    p = 2 ** math.floor(math.log2(num_heads))
    return geometric(p) + geometric(2 * p)[0::2][: num_heads - p]


class ALiBi(PositionalEncoding):
    """Attention with linear biases: each head penalises a key by ``slope_h * |q_pos - k_pos|``.

    The same bias serves causal stacks (Press et al. bias ``slope * (k - q)``, equal on every visible key)
    and bidirectional ones (symmetric distance, as in MPT/BLOOM-style encoders). No parameters.
    """

    def __init__(self, d_model: int, *, num_heads: int, device=None, dtype=None) -> None:
        super().__init__()
        self.register_buffer("slopes", torch.empty(num_heads, device=device, dtype=dtype), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """(Re)fill the slopes, e.g. after ``to_empty()`` from the meta device."""
        with torch.no_grad():
            self.slopes.copy_(torch.tensor(alibi_slopes(self.slopes.numel()), dtype=torch.float64))

    def score_bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        distance = (k_pos[:, None, None, :] - q_pos[:, None, :, None]).abs()  # (N|1, 1, L, S)
        return -self.slopes[:, None, None] * distance  # (N|1, H, L, S)


class ALiBiConfig(PositionalConfig):
    type: Literal["alibi"] = "alibi"
    style: ClassVar[str] = "bias"

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Shown inside every self-attention."""
        return Label("positional", "ALiBi position bias")
