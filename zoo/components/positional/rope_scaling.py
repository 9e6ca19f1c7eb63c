"""RoPE's long-context scalings: how the rotation speeds (and the magnitude of cos and sin) change for contexts
longer than the one a model was first trained on, each as transformers' ``ROPE_INIT_FUNCTIONS`` computes it.

``linear``, ``llama3`` and ``yarn`` fix the speeds once. ``dynamic`` (dynamic NTK) and ``longrope`` (LongRoPE,
Phi-3 / Phi-4) depend on the length of the sequence a call sees, ``max(positions) + 1``, as transformers'
``dynamic_rope_update`` decides: the speeds of a call are chosen from that 0-d tensor, never from a Python int, so
a forward pass reads no value off the device and traces as one graph.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

SCALINGS = ("none", "linear", "dynamic", "yarn", "longrope", "llama3")
"""zoo's rope scalings; all but ``none`` are transformers' ``rope_type`` of the same name."""

LENGTH_DEPENDENT = ("dynamic", "longrope")
"""The scalings whose speeds depend on the length of the sequence (``scale_frequencies``' ``seq_len``)."""


def _exponents(dim: int, device: torch.device | None) -> torch.Tensor:
    """``2i / dim`` for ``i`` in ``[0, dim/2)``, in float32, as transformers makes them."""
    return torch.arange(0, dim, 2, dtype=torch.int64, device=device).to(torch.float32) / dim


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
    short_factor: Sequence[float] | None = None,
    long_factor: Sequence[float] | None = None,
    seq_len: torch.Tensor | int | None = None,
) -> torch.Tensor:
    """RoPE speeds stretched for contexts longer than the model was first trained on.

    ``speeds`` are the unscaled ``theta^(-2i/dim)`` of the ``dim / 2`` pairs. ``linear`` divides every speed by
    ``factor`` (position interpolation). ``llama3`` (Llama 3.1+) divides only the slow pairs, whose wavelength
    exceeds ``original_max_len / low_freq_factor``; keeps the fast ones, shorter than ``original_max_len /
    high_freq_factor``; and blends smoothly in between. ``yarn`` (YaRN, DeepSeek-V3) keeps the pairs that turn
    more than ``beta_fast`` times within ``original_max_len`` positions, divides those that turn less than
    ``beta_slow`` times, and ramps linearly between them over the pair index, as transformers'
    ``_compute_yarn_parameters`` (``truncate`` rounds the ramp's ends outwards to whole pairs).

    ``dynamic`` (dynamic NTK) keeps the speeds up to ``original_max_len`` positions; a longer sequence of
    ``seq_len`` positions raises the base to ``theta · (factor · seq_len / original_max_len - (factor - 1)) **
    (dim / (dim - 2))``. ``longrope`` divides pair ``i``'s speed by ``short_factor[i]``, or by ``long_factor[i]``
    once the sequence is longer than ``original_max_len``. Both recompute the speeds from ``theta`` in
    transformers' order of operations, to the last bit; ``seq_len`` None is a sequence within the original length.
    """
    if scaling == "none":
        return speeds
    if scaling == "linear":
        return speeds / factor
    dim = 2 * speeds.numel()
    if scaling == "dynamic":
        if seq_len is None:
            return speeds
        length = torch.as_tensor(seq_len, device=speeds.device)
        longer = torch.clamp(length, min=original_max_len)  # the formula at the original length gives theta
        base = theta * ((factor * longer / original_max_len) - (factor - 1)) ** (dim / (dim - 2))
        grown = 1.0 / (base ** _exponents(dim, speeds.device))
        return torch.where(length > original_max_len, grown, speeds)
    if scaling == "longrope":
        if short_factor is None or long_factor is None:
            raise ValueError("longrope needs short_factor and long_factor")
        shape = theta ** _exponents(dim, speeds.device)
        short = 1.0 / (torch.tensor(short_factor, dtype=torch.float32, device=speeds.device) * shape)
        if seq_len is None:
            return short
        long = 1.0 / (torch.tensor(long_factor, dtype=torch.float32, device=speeds.device) * shape)
        return torch.where(torch.as_tensor(seq_len, device=speeds.device) > original_max_len, long, short)
    if scaling == "yarn":

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
    if scaling == "llama3":
        wavelength = 2 * math.pi / speeds
        smooth = (original_max_len / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
        blended = (1 - smooth) * speeds / factor + smooth * speeds
        slow = wavelength > original_max_len / low_freq_factor
        fast = wavelength < original_max_len / high_freq_factor
        return torch.where(slow, speeds / factor, torch.where(fast, speeds, blended))
    raise ValueError(f"unknown rope scaling {scaling!r}: choose one of {', '.join(SCALINGS)}")


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction ``0.1 · mscale · ln(factor) + 1`` (1 for ``factor <= 1``)."""
    return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1 else 1.0


def yarn_attention_factor(factor: float, mscale: float | None = None, mscale_all_dim: float | None = None) -> float:
    """The factor YaRN multiplies cos and sin by: ``yarn_mscale(factor, mscale) / yarn_mscale(factor,
    mscale_all_dim)`` when both are given and nonzero (DeepSeek: 1.0 / 1.0, so 1), else ``yarn_mscale(factor)``."""
    if mscale and mscale_all_dim:
        return float(yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim))
    return yarn_mscale(factor)


def longrope_attention_factor(factor: float, original_max_len: int) -> float:
    """The factor LongRoPE multiplies cos and sin by: ``sqrt(1 + ln(factor) / ln(original_max_len))`` (1 for
    ``factor <= 1``), as transformers' ``_compute_longrope_parameters`` derives it."""
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(factor) / math.log(original_max_len))


def scaled_attention_factor(
    scaling: str,
    factor: float,
    original_max_len: int,
    *,
    given: float | None = None,
    mscale: float | None = None,
    mscale_all_dim: float | None = None,
) -> float:
    """What a scaling multiplies cos and sin by: ``given`` where set (yarn, longrope), else its default (1 for
    the scalings that keep the magnitude)."""
    if scaling == "yarn":
        return yarn_attention_factor(factor, mscale, mscale_all_dim) if given is None else given
    if scaling == "longrope":
        return longrope_attention_factor(factor, original_max_len) if given is None else given
    return 1.0


def scaling_problems(
    scaling: str,
    *,
    low_freq_factor: float,
    high_freq_factor: float,
    original_max_len: int,
    short_factor: Sequence[float] | None,
    long_factor: Sequence[float] | None,
    attention_factor: float | None,
    mscale: float | None,
    mscale_all_dim: float | None,
) -> list[str]:
    """Why these scaling options do not go together (a config's validation, and the module's), or []."""
    problems = []
    if scaling == "llama3" and high_freq_factor < low_freq_factor:  # equal: no blend (Llama 4: 1.0 and 1.0)
        problems.append(f"high_freq_factor ({high_freq_factor}) must be at least low_freq_factor ({low_freq_factor})")
    if scaling == "longrope":
        missing = [name for name, v in (("short_factor", short_factor), ("long_factor", long_factor)) if v is None]
        if missing:
            problems.append(f"longrope needs {' and '.join(missing)}: a factor for each rotated pair of dims")
        elif len(short_factor) != len(long_factor):  # type: ignore[arg-type]
            problems.append(
                f"longrope's short_factor ({len(short_factor)} factors) and long_factor ({len(long_factor)}) "  # type: ignore[arg-type]
                "must be as long as each other: one factor for each rotated pair of dims"
            )
        if original_max_len < 2:
            problems.append("longrope's original_max_len must be at least 2 (its attention factor divides by its log)")
    else:
        given = [name for name, v in (("short_factor", short_factor), ("long_factor", long_factor)) if v is not None]
        if given:
            problems.append(f"{' and '.join(given)} are longrope's; scaling is {scaling!r}")
    if attention_factor is not None and scaling not in ("yarn", "longrope"):
        problems.append(f"attention_factor is yarn's and longrope's; scaling is {scaling!r}")
    for name, value in (("mscale", mscale), ("mscale_all_dim", mscale_all_dim)):
        if value is not None and scaling != "yarn":
            problems.append(f"{name} is yarn's; scaling is {scaling!r}")
    return problems


def rotated_dims_problem(scaling: str, rotary_dim: int, short_factor: Sequence[float] | None) -> str | None:
    """Why a scaling cannot stretch ``rotary_dim`` rotated dims, or None: longrope needs one factor per pair;
    dynamic NTK at least two pairs (its exponent is ``dim / (dim - 2)``)."""
    if scaling == "dynamic" and rotary_dim < 4:
        return f"dynamic scaling needs at least 4 rotated dims (its base grows by dim / (dim - 2)), not {rotary_dim}"
    if scaling != "longrope" or short_factor is None or len(short_factor) == rotary_dim // 2:
        return None
    return (
        f"longrope has {len(short_factor)} short and long factors for {rotary_dim} rotated dims; it needs "
        f"{rotary_dim // 2}, one for each pair"
    )
