"""``rope``: rotary position embedding, with its long-context frequency scalings (linear, dynamic NTK, YaRN,
LongRoPE, Llama 3: ``rope_scaling``)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import torch
from pydantic import Field, model_validator

from zoo.config import BuildContext
from zoo.label import Label, number
from zoo.limits import MAX_HEAD_DIM, MAX_POSITIONS

from .base import PositionalConfig, PositionalEncoding, inverse_frequencies
from .rope_scaling import (
    LENGTH_DEPENDENT,
    rotated_dims_problem,
    scale_frequencies,
    scaled_attention_factor,
    scaling_problems,
)

Scaling = Literal["none", "linear", "dynamic", "yarn", "longrope", "llama3"]


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


class RotaryEmbedding(PositionalEncoding):
    """Rotary position embedding (RoPE, Su et al.): rotate q and k so that q·k depends on relative position.

    Dims are rotated in pairs, pair ``i`` by angle ``p * theta^(-2i/R)`` at position ``p``, over the first
    ``R = round(head_dim * rotary_fraction)`` dims of each head; the rest pass through (GPT-NeoX, Phi).
    ``interleaved=False`` pairs dim ``i`` with ``i + R/2`` (GPT-NeoX / Llama "rotate_half");
    ``interleaved=True`` pairs adjacent dims ``2i, 2i+1`` (GPT-J, the paper). Weights trained under one
    convention need the other's q/k projection rows permuted.

    ``scaling`` stretches the speeds for long contexts (``rope_scaling.scale_frequencies``). Two scalings depend
    on the length of the sequence a call sees, ``max(positions) + 1``, as transformers' ``dynamic_rope_update``
    decides for a forward pass (their speeds are transformers' to the last bit); a key keeps the rotation of the
    call that computed it:

    - ``dynamic`` (dynamic NTK) raises the base once a call's sequence is longer than ``original_max_len``.
      Decoding through a KV cache past it is then not the recomputation of the whole sequence (each key keeps
      the base of its own step), in transformers too; zoo decodes as transformers' ``generate`` does.
    - ``longrope`` (LongRoPE, Phi-3 / Phi-4 128k) divides the speeds by ``short_factor`` and, once a call's
      sequence is longer than ``original_max_len``, by ``long_factor``, and scales cos and sin by
      ``attention_factor``. A cache filled below ``original_max_len`` is stale past it (``stale_after``):
      generation recomputes it there, as transformers' Phi-3 ``generate`` does, so cached decoding still equals
      recomputation.
    """

    def __init__(
        self,
        d_model: int,
        *,
        head_dim: int,
        theta: float = 10000.0,
        rotary_fraction: float = 1.0,
        interleaved: bool = False,
        scaling: Scaling = "none",
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
        short_factor: list[float] | None = None,
        long_factor: list[float] | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.rotary_dim = rotary_dims(head_dim, rotary_fraction)
        problems = [
            rotary_problem(head_dim, rotary_fraction),
            rotated_dims_problem(scaling, self.rotary_dim, short_factor),
        ]
        problems += scaling_problems(
            scaling,
            low_freq_factor=low_freq_factor,
            high_freq_factor=high_freq_factor,
            original_max_len=original_max_len,
            short_factor=short_factor,
            long_factor=long_factor,
            attention_factor=attention_factor,
            mscale=mscale,
            mscale_all_dim=mscale_all_dim,
        )
        if any(problems):
            raise ValueError("; ".join(p for p in problems if p))
        self.head_dim = head_dim
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
            short_factor=None if short_factor is None else [float(f) for f in short_factor],
            long_factor=None if long_factor is None else [float(f) for f in long_factor],
        )
        self.length_dependent = scaling in LENGTH_DEPENDENT
        self.stale_after = original_max_len if scaling == "longrope" else None
        # YaRN and LongRoPE also scale cos and sin (so every rotated q·k term) by their attention factor, by
        # default derived as transformers' _compute_yarn_parameters and _compute_longrope_parameters do.
        self.attention_factor = scaled_attention_factor(
            scaling,
            scaling_factor,
            original_max_len,
            given=attention_factor,
            mscale=mscale,
            mscale_all_dim=mscale_all_dim,
        )

    def speeds(self, positions: torch.Tensor) -> torch.Tensor:
        """The (R/2,) float32 angular speeds of a call at ``positions`` (dynamic and longrope read the length
        of its sequence, ``max(positions) + 1``, as a 0-d tensor)."""
        speeds = inverse_frequencies(self.rotary_dim, self.theta, device=positions.device)
        seq_len = positions.max() + 1 if self.length_dependent else None
        return scale_frequencies(speeds, **self.scaling, seq_len=seq_len)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Angles come from the positions on every call, not from a cos/sin table gathered by position:
        # the cost is one (N|1, L, R/2) product, any position works (cache offsets past max_len included),
        # and no float buffer exists for model.to(bfloat16) to round (a bf16 inverse-frequency table is
        # off by radians at positions in the thousands). Hugging Face's Llama computes them the same way.
        angles = positions[:, None, :, None].float() * self.speeds(positions)  # (N|1, 1, L, R/2): over heads
        cos, sin = angles.cos(), angles.sin()
        if self.attention_factor != 1.0:  # yarn, longrope
            cos, sin = cos * self.attention_factor, sin * self.attention_factor
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        r = self.rotary_dim
        pairs = x[..., :r].unflatten(-1, self._pair_shape)  # (N, H, L, R/2, 2) or (N, H, L, 2, R/2)
        x1, x2 = pairs.unbind(self._pair_dim)  # (N, H, L, R/2) each: the two members of every pair
        rotated = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=self._pair_dim)
        return torch.cat((rotated.flatten(-2), x[..., r:]), dim=-1)  # (N, H, L, D)


SCALING_NAMES = {
    "linear": "linear",
    "dynamic": "dynamic NTK",
    "yarn": "YaRN",
    "longrope": "LongRoPE",
    "llama3": "Llama 3",
}
"""How a label names each scaling."""

Factors = list[Annotated[float, Field(gt=0, allow_inf_nan=False)]]


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

    scaling: Scaling = Field(
        "none",
        description="Stretch the speeds for long contexts: linear interpolation, dynamic NTK (the base grows past "
        "original_max_len), YaRN (DeepSeek-V3, Qwen), LongRoPE (Phi-3 128k: per-pair factors) or Llama 3.1's rule.",
    )
    scaling_factor: float = Field(
        1.0,
        ge=1,
        description="How much longer than original_max_len (Llama 3.2: 32); dynamic: how fast the base grows; "
        "longrope: sets the default attention_factor only.",
    )
    low_freq_factor: float = Field(1.0, gt=0, description="llama3: longer wavelengths are scaled.")
    high_freq_factor: float = Field(4.0, gt=0, description="llama3: shorter wavelengths are kept.")
    original_max_len: int = Field(
        8192,
        ge=1,
        le=MAX_POSITIONS,
        description="The context length the speeds were trained for: dynamic grows the base, and longrope takes "
        "its long factors, for sequences longer than this.",
    )
    beta_fast: float = Field(32.0, gt=0, description="yarn: pairs turning more often than this are kept.")
    beta_slow: float = Field(1.0, gt=0, description="yarn: pairs turning less often than this are scaled.")
    truncate: bool = Field(True, description="yarn: round the ramp's ends outwards to whole pairs.")
    attention_factor: float | None = Field(
        None,
        gt=0,
        description="yarn, longrope: multiplies cos and sin; by default derived as transformers does (yarn: from "
        "mscale and mscale_all_dim; longrope: sqrt(1 + ln(scaling_factor) / ln(original_max_len))).",
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
    short_factor: Factors | None = Field(
        None,
        max_length=MAX_HEAD_DIM // 2,
        description="longrope: what each rotated pair's speed is divided by for sequences up to original_max_len "
        "(one factor per pair: rotated dims / 2).",
    )
    long_factor: Factors | None = Field(
        None,
        max_length=MAX_HEAD_DIM // 2,
        description="longrope: what each rotated pair's speed is divided by for sequences longer than "
        "original_max_len (as many factors as short_factor).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"theta": 500000.0, "rotary_fraction": 0.5, "interleaved": True},
        {"scaling": "llama3", "scaling_factor": 8.0, "original_max_len": 4},
        {"scaling": "yarn", "scaling_factor": 4.0, "original_max_len": 4, "beta_fast": 8.0},
        # The contract's 8-token sequences stay within the original length: past it, dynamic NTK's cached keys
        # keep their base (as transformers' do) and would differ from a recomputation.
        {"scaling": "dynamic", "scaling_factor": 2.0, "original_max_len": 8},
        # Past original_max_len from the third token on: the long factors (a cache filled below the original
        # length goes stale past it, and generation recomputes it there).
        {
            "scaling": "longrope",
            "scaling_factor": 4.0,
            "original_max_len": 2,
            "short_factor": [1.0, 1.5, 2.0, 3.0],
            "long_factor": [1.0, 2.0, 4.0, 8.0],
        },
    )

    @model_validator(mode="after")
    def _scaling_is_consistent(self):
        problems = scaling_problems(
            self.scaling,
            low_freq_factor=self.low_freq_factor,
            high_freq_factor=self.high_freq_factor,
            original_max_len=self.original_max_len,
            short_factor=self.short_factor,
            long_factor=self.long_factor,
            attention_factor=self.attention_factor,
            mscale=self.mscale,
            mscale_all_dim=self.mscale_all_dim,
        )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def check(self, ctx: BuildContext) -> list[str]:
        problem = rotary_problem(ctx.head_dim, self.rotary_fraction) or rotated_dims_problem(
            self.scaling, rotary_dims(ctx.head_dim, self.rotary_fraction), self.short_factor
        )
        return [problem] if problem else []

    def label(self, kind: str, ctx: BuildContext, module: Any, *, note: str | None = None) -> Label:
        """Shown inside every self-attention: θ, the share of head dims rotated, the long-context scaling."""
        theta = float(round(self.theta)) if self.theta >= 100 else self.theta  # whole, not %g's 6 digits
        words = [f"RoPE θ={number(theta)}"]
        if self.rotary_fraction < 1:
            words.append(f"on {self.rotary_fraction:g} of dims")
        if self.scaling != "none":
            scaled = f"{SCALING_NAMES[self.scaling]} scaling ×{number(self.scaling_factor)}"
            if self.scaling != "linear":
                scaled += f" past {number(self.original_max_len)}"
            words.append(scaled)
        return Label("positional", ", ".join(words))
