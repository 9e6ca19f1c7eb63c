"""``rope``: rotary position embedding, with its long-context frequency scaling (linear, Llama 3, YaRN)."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field, model_validator

from zoo.config import BuildContext
from zoo.label import Label, number
from zoo.limits import MAX_POSITIONS

from .base import PositionalConfig, PositionalEncoding, inverse_frequencies


def scale_frequencies(
    speeds: torch.Tensor,
    scaling: str,
    *,
    factor: float = 1.0,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
    original_max_len: int = 8192,
    theta: float = 10000.0,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    truncate: bool = True,
) -> torch.Tensor:
    """RoPE speeds stretched for contexts longer than the model was first trained on.

    ``linear`` divides every speed by ``factor`` (position interpolation). ``llama3`` (Llama 3.1+) divides
    only the slow pairs, whose wavelength exceeds ``original_max_len / low_freq_factor``; keeps the fast
    ones, shorter than ``original_max_len / high_freq_factor``; and blends smoothly in between.
    ``yarn`` (YaRN, DeepSeek-V3) keeps the pairs that turn more than ``beta_fast`` times within
    ``original_max_len`` positions, divides those that turn less than ``beta_slow`` times, and ramps
    linearly between them over the pair index, as transformers' ``_compute_yarn_parameters`` (``theta``
    is the base of ``speeds``; ``truncate`` rounds the ramp's ends outwards to whole pairs).
    """
    if scaling == "none":
        return speeds
    if scaling == "linear":
        return speeds / factor
    if scaling == "yarn":
        dim = 2 * speeds.numel()

        def pair_turning(rotations: float) -> float:  # the (fractional) pair index that turns `rotations` times
            return dim * math.log(original_max_len / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        low, high = pair_turning(beta_fast), pair_turning(beta_slow)
        if truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001  # transformers' guard against a zero-width ramp
        ramp = (torch.arange(dim // 2, dtype=torch.float32, device=speeds.device) - low) / (high - low)
        kept = 1 - ramp.clamp(0, 1)  # 1: the speed as it is (fast pairs), 0: divided by factor (slow ones)
        return speeds / factor * (1 - kept) + speeds * kept
    wavelength = 2 * math.pi / speeds
    smooth = (original_max_len / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - smooth) * speeds / factor + smooth * speeds
    slow = wavelength > original_max_len / low_freq_factor
    fast = wavelength < original_max_len / high_freq_factor
    return torch.where(slow, speeds / factor, torch.where(fast, speeds, blended))


def rotary_dims(head_dim: int, rotary_fraction: float) -> int:
    """How many leading dims of each head RoPE rotates."""
    return round(head_dim * rotary_fraction)


def rotary_problem(head_dim: int, rotary_fraction: float) -> str | None:
    """Why RoPE cannot rotate ``rotary_fraction`` of ``head_dim`` dims, or None when it can."""
    rotated = rotary_dims(head_dim, rotary_fraction)
    if rotated < 2 or rotated % 2:
        return (
            f"rope rotates {rotated} of {head_dim} head dims (rotary_fraction {rotary_fraction}); "
            "that must be an even number" + (" of at least 2" if rotated < 2 else "")
        )
    return None


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction ``0.1 · mscale · ln(factor) + 1`` (1 for ``factor <= 1``)."""
    return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1 else 1.0


def yarn_attention_factor(factor: float, mscale: float | None = None, mscale_all_dim: float | None = None) -> float:
    """The factor YaRN multiplies cos and sin by: ``yarn_mscale(factor, mscale) / yarn_mscale(factor,
    mscale_all_dim)`` when both are given and nonzero (DeepSeek: 1.0 / 1.0, so 1), else ``yarn_mscale(factor)``."""
    if mscale and mscale_all_dim:
        return float(yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim))
    return yarn_mscale(factor)


class RotaryEmbedding(PositionalEncoding):
    """Rotary position embedding (RoPE, Su et al.): rotate q and k so that q·k depends on relative position.

    Dims are rotated in pairs, pair ``i`` by angle ``p * theta^(-2i/R)`` at position ``p``, over the first
    ``R = round(head_dim * rotary_fraction)`` dims of each head; the rest pass through (GPT-NeoX, Phi).
    ``interleaved=False`` pairs dim ``i`` with ``i + R/2`` (GPT-NeoX / Llama "rotate_half");
    ``interleaved=True`` pairs adjacent dims ``2i, 2i+1`` (GPT-J, the paper). Weights trained under one
    convention need the other's q/k projection rows permuted.
    """

    def __init__(
        self,
        d_model: int,
        *,
        head_dim: int,
        theta: float = 10000.0,
        rotary_fraction: float = 1.0,
        interleaved: bool = False,
        scaling: Literal["none", "linear", "llama3", "yarn"] = "none",
        scaling_factor: float = 1.0,
        low_freq_factor: float = 1.0,
        high_freq_factor: float = 4.0,
        original_max_len: int = 8192,
        beta_fast: float = 32.0,
        beta_slow: float = 1.0,
        truncate: bool = True,
        attention_factor: float | None = None,
        mscale: float | None = None,
        mscale_all_dim: float | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        problem = rotary_problem(head_dim, rotary_fraction)
        if problem:
            raise ValueError(problem)
        self.head_dim = head_dim
        self.rotary_dim = rotary_dims(head_dim, rotary_fraction)
        self.theta = theta
        self.interleaved = interleaved
        # Where the two members of a pair sit once the rotated dims are split into pairs:
        # adjacent -> (R/2, 2), pair axis last; halves -> (2, R/2), pair axis second to last.
        self._pair_shape = (-1, 2) if interleaved else (2, -1)
        self._pair_dim = -1 if interleaved else -2
        self.scaling = dict(
            scaling=scaling,
            factor=scaling_factor,
            low_freq_factor=low_freq_factor,
            high_freq_factor=high_freq_factor,
            original_max_len=original_max_len,
            theta=theta,
            beta_fast=beta_fast,
            beta_slow=beta_slow,
            truncate=truncate,
        )
        # YaRN also scales cos and sin (so every rotated q·k term) by its attention factor, by default
        # derived as transformers' _compute_yarn_parameters does.
        if scaling != "yarn":
            attention_factor = 1.0
        elif attention_factor is None:
            attention_factor = yarn_attention_factor(scaling_factor, mscale, mscale_all_dim)
        self.attention_factor = attention_factor

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Angles come from the positions on every call, not from a cos/sin table gathered by position:
        # the cost is one (N|1, L, R/2) product, any position works (cache offsets past max_len included),
        # and no float buffer exists for model.to(bfloat16) to round (a bf16 inverse-frequency table is
        # off by radians at positions in the thousands). Hugging Face's Llama computes them the same way.
        speeds = inverse_frequencies(self.rotary_dim, self.theta, device=positions.device)  # (R/2,)
        speeds = scale_frequencies(speeds, **self.scaling)
        angles = positions[:, None, :, None].float() * speeds  # (N|1, 1, L, R/2): broadcasts over heads
        cos, sin = angles.cos(), angles.sin()
        if self.attention_factor != 1.0:  # yarn
            cos, sin = cos * self.attention_factor, sin * self.attention_factor
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        r = self.rotary_dim
        pairs = x[..., :r].unflatten(-1, self._pair_shape)  # (N, H, L, R/2, 2) or (N, H, L, 2, R/2)
        x1, x2 = pairs.unbind(self._pair_dim)  # (N, H, L, R/2) each: the two members of every pair
        rotated = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=self._pair_dim)
        return torch.cat((rotated.flatten(-2), x[..., r:]), dim=-1)  # (N, H, L, D)


class RopeConfig(PositionalConfig):
    type: Literal["rope"] = "rope"
    style: ClassVar[str] = "rotate"
    theta: float = Field(10000.0, gt=1, description="Base of the rotation speeds (Llama 3: 500000).")
    rotary_fraction: float = Field(
        1.0, gt=0, le=1, description="Fraction of each head's dims that are rotated (GPT-NeoX: 0.25)."
    )
    interleaved: bool = Field(
        False,
        description="Rotate adjacent dim pairs (GPT-J) instead of dims i and i + D/2 (GPT-NeoX, Llama).",
    )

    scaling: Literal["none", "linear", "llama3", "yarn"] = Field(
        "none",
        description="Stretch the speeds for long contexts: linear interpolation, Llama 3.1's rule or YaRN "
        "(DeepSeek-V3).",
    )
    scaling_factor: float = Field(1.0, ge=1, description="How much longer than original_max_len (Llama 3.2: 32).")
    low_freq_factor: float = Field(1.0, gt=0, description="llama3: longer wavelengths are scaled.")
    high_freq_factor: float = Field(4.0, gt=0, description="llama3: shorter wavelengths are kept.")
    original_max_len: int = Field(
        8192, ge=1, le=MAX_POSITIONS, description="The context length the speeds were trained for."
    )
    beta_fast: float = Field(32.0, gt=0, description="yarn: pairs turning more often than this are kept.")
    beta_slow: float = Field(1.0, gt=0, description="yarn: pairs turning less often than this are scaled.")
    truncate: bool = Field(True, description="yarn: round the ramp's ends outwards to whole pairs.")
    attention_factor: float | None = Field(
        None,
        gt=0,
        description="yarn: multiplies cos and sin; default from mscale and mscale_all_dim as transformers derives it.",
    )
    mscale: float | None = Field(
        None, ge=0, description="yarn: numerator of the default attention_factor (DeepSeek-V3: 1.0)."
    )
    mscale_all_dim: float | None = Field(
        None,
        ge=0,
        description="yarn: denominator of the default attention_factor (DeepSeek-V3: 1.0; its attention's scale "
        "grows by the same mscale, squared).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"theta": 500000.0, "rotary_fraction": 0.5, "interleaved": True},
        {"scaling": "llama3", "scaling_factor": 8.0, "original_max_len": 4},
        {"scaling": "yarn", "scaling_factor": 4.0, "original_max_len": 4, "beta_fast": 8.0},
    )

    @model_validator(mode="after")
    def _scaling_is_consistent(self):
        if self.scaling == "llama3" and self.high_freq_factor <= self.low_freq_factor:
            raise ValueError(
                f"high_freq_factor ({self.high_freq_factor}) must exceed low_freq_factor ({self.low_freq_factor})"
            )
        return self

    def check(self, ctx: BuildContext) -> list[str]:
        problem = rotary_problem(ctx.head_dim, self.rotary_fraction)
        return [problem] if problem else []

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Shown inside every self-attention: θ, the share of head dims rotated, the long-context scaling."""
        words = [f"RoPE θ={number(self.theta)}"]
        if self.rotary_fraction < 1:
            words.append(f"on {self.rotary_fraction:g} of dims")
        if self.scaling != "none":
            words.append(f"{self.scaling} scaling ×{number(self.scaling_factor)}")
        return Label("positional", ", ".join(words))
