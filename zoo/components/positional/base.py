"""What every positional encoding shares: the base module and config, positions, and the sin/cos speeds.

:class:`PositionalEncoding` (one method per style, each the identity unless overridden) and
:class:`PositionalConfig` are the bases of every encoding; ``positions_for`` makes the common ``arange``
positions; ``inverse_frequencies`` and ``sinusoid_table`` are the sin/cos speeds and table that the
sinusoidal and learned encodings and RoPE build on.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost


def positions_for(
    length: int, offset: int | torch.Tensor = 0, device: torch.device | str | None = None
) -> torch.Tensor:
    """Positions ``offset .. offset + length - 1`` as a (1, L) LongTensor (``offset`` an int or a 0-d tensor)."""
    return (offset + torch.arange(length, device=device)).unsqueeze(0)  # (1, L)


def inverse_frequencies(
    dim: int, base: float, *, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """``base^(-2i/dim)`` for ``i`` in ``[0, dim/2)``: the angular speed of each sin/cos pair, shape (dim/2,).

    Sinusoidal encodings and RoPE share these speeds: position ``p`` turns pair ``i`` by ``p * speed[i]``.
    """
    exponents = torch.arange(0, dim, 2, device=device, dtype=torch.int64).to(dtype) / dim
    return 1.0 / (base**exponents)


class PositionalEncoding(nn.Module):
    """Base of positional encodings: adds nothing, rotates nothing, biases nothing.

    Subclasses override only the method of their style; attention and models call all three blindly.
    """

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Add absolute encodings to the input x (N, L, E) at ``positions`` (N|1, L)."""
        return x

    stale_after: int | None = None
    """A sequence length past which the keys a cache holds from shorter calls differ from what one call over the
    whole sequence computes (LongRoPE takes its long factors past its original length), or None: cached keys
    never go stale. Generation recomputes its cache once, when a sequence first grows past it, as transformers'
    Phi-3 ``generate`` does (``zoo.generate.recompute_length``)."""

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate q (N, H, L, D) and k (N, Hkv, L, D), both at ``positions`` (N|1, L)."""
        return q, k

    def score_bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        """Float (N|1, H, L, S) bias for queries at q_pos (N|1, L) and keys at k_pos (N|1, S), or None."""
        return None

    def positions_from_ids(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        """Positions (N, L) that depend on the tokens (numbering that skips padding), or None: the
        architecture's ``0 .. L-1``. An encoder asks for them when its caller gives no positions."""
        return None


def sinusoid_table(max_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """``PE[p, 2i] = sin(p / base^(2i/E))``, ``PE[p, 2i+1] = cos(...)``: (max_len, E) in float64."""
    speeds = inverse_frequencies(d_model, base, dtype=torch.float64)  # (E/2,)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * speeds  # (max_len, E/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)  # (max_len, E): sin, cos, ...


class PositionalConfig(ComponentConfig):
    """Base of positional configs."""

    bounded_by_max_len: ClassVar[bool] = False
    """True when the encoding has rows for positions below ``max_len`` only: longer sequences are refused."""

    style: ClassVar[str] = "embed"
    """How the encoding reaches the model (``zoo.config.POSITIONAL_STYLES``): ``embed`` (added to the input),
    ``rotate`` (rotates queries and keys), ``bias`` (a score bias) or ``none``; an attention whose
    ``positional_styles`` lack it refuses the encoding."""

    def cost(self, ctx: BuildContext) -> Cost:
        """No parameters (computed from positions; sinusoidal tables are non-persistent buffers) unless a
        subclass says otherwise."""
        return Cost(params=0)
