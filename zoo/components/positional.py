"""Positional encodings: how attention learns where each token sits.

A stack owns ONE positional module, shared by all its layers and handed to every attention as ``pos``.
Position reaches the model in one of three styles; :class:`PositionalEncoding` has one method per style,
each the identity (or ``None``) unless a subclass overrides it:

- ``embed(x, positions) -> x``: absolute. A vector per position is added to the (N, L, E) input once,
  before the first block (``sinusoidal``, ``learned``).
- ``rotate(q, k, positions) -> (q, k)``: rotary. Every attention rotates its queries and keys by angles
  proportional to position, so q·k depends only on how far apart the two tokens are (``rope``).
- ``score_bias(q_pos, k_pos) -> bias | None``: relative bias. Every attention adds a float (N|1, H, L, S)
  bias to its scores before the softmax (``alibi``, ``t5_relative``).

``positions`` are absolute LongTensor positions of shape (N, L) or (1, L), cache offset included: decoding
the token at position 57 passes ``[[57]]``. ``positions_for`` makes the common ``arange`` case.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field, model_validator
from torch import nn

from zoo.config import BuildContext, ComponentConfig
from zoo.cost import Cost
from zoo.hookspecs import hookimpl
from zoo.limits import MAX_POSITIONS


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


class PositionalEncoding(nn.Module):
    """Base of positional encodings: adds nothing, rotates nothing, biases nothing.

    Subclasses override only the method of their style; attention and models call all three blindly.
    """

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Add absolute encodings to the input x (N, L, E) at ``positions`` (N|1, L)."""
        return x

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


class NoPositionalEncoding(PositionalEncoding):
    """No positional information at all (order is then known only through the causal mask, if any)."""

    def __init__(self, d_model: int, *, device=None, dtype=None) -> None:
        super().__init__()


def fairseq_sinusoid_table(rows: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """fairseq's table (M2M-100, as transformers computes it, in float32): row ``p`` holds ``sin(p * s_i)`` for
    every ``i`` in ``[0, E/2)``, then ``cos(p * s_i)``, at speeds ``s_i = base^(-i / (E/2 - 1))``. (rows, E)."""
    half = d_model // 2
    speeds = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(base) / (half - 1)))  # (E/2,)
    angles = torch.arange(rows, dtype=torch.int64).float().unsqueeze(1) * speeds.unsqueeze(0)  # (rows, E/2)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)  # (rows, E): sines, then cosines


class SinusoidalEncoding(PositionalEncoding):
    """Fixed sinusoids of Vaswani et al. added to the input.

    ``PE[p, 2i] = sin(p / base^(2i/E))`` and ``PE[p, 2i+1] = cos(p / base^(2i/E))``: sin and cos interleaved.
    ``layout="fairseq"`` is fairseq's table instead (M2M-100): all sines, then all cosines, at speeds
    ``base^(-i / (E/2 - 1))`` (see :func:`fairseq_sinusoid_table`).

    The table holds ``max_len + offset`` rows and position ``p`` reads row ``p + offset``; it is a
    non-persistent buffer (no parameters, not in the state dict) because it is a pure function of its options.
    With ``padding_idx`` positions are numbered from the token ids as fairseq numbers them: the k-th token that
    is not ``padding_idx`` is at position k - 1 and every padding token reads row ``offset - 1``, which is zero
    (M2M-100: offset 2 = padding_idx + 1). The model's token embedding does any ``sqrt(d_model)`` scaling; this
    module only adds.
    """

    def __init__(
        self,
        d_model: int,
        *,
        base: float = 10000.0,
        max_len: int,
        offset: int = 0,
        padding_idx: int | None = None,
        layout: Literal["interleaved", "fairseq"] = "interleaved",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if d_model % 2:
            raise ValueError(f"sinusoidal encoding needs an even d_model, got {d_model}")
        if padding_idx is not None and offset < 1:
            raise ValueError("padding-aware positions read row offset - 1 for padding: offset must be >= 1")
        self.base = base
        self.offset = offset
        self.padding_idx = padding_idx
        self.layout = layout
        table = torch.empty(max_len + offset, d_model, device=device, dtype=dtype)
        self.register_buffer("table", table, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """(Re)compute the table, e.g. after ``to_empty()`` from the meta device."""
        if self.table.is_meta:
            return  # no values to set (and a table for a long max_len would take seconds to compute)
        if self.layout == "fairseq":
            table = fairseq_sinusoid_table(*self.table.shape, self.base)
        else:  # float64 so that every row is exact to the table's dtype, however long the table.
            table = sinusoid_table(*self.table.shape, self.base)
        if self.padding_idx is not None:
            table[self.offset - 1] = 0  # the row every padding token reads
        with torch.no_grad():
            self.table.copy_(table)

    def positions_from_ids(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        if self.padding_idx is None:
            return None
        real = input_ids.ne(self.padding_idx).long()
        return real.cumsum(-1) * real - 1  # (N, L): k - 1 for the k-th real token, -1 for padding

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x + self.table[positions + self.offset if self.offset else positions].to(x.dtype)  # (N, L, E)


class LearnedEncoding(PositionalEncoding):
    """A learned vector per absolute position added to the input (GPT-2, BERT); ``max_len`` rows, no more.

    With ``offset`` the table has ``max_len + offset`` rows and position ``p`` reads row ``p + offset``
    (OPT: 2; its first two rows are never read). Rows are drawn from N(0, init_std), the recipe's init
    (GPT-2 and BERT: 0.02); nn.Embedding's N(0, 1) would drown the tokens; ``sinusoidal_init`` fills them
    with the sinusoids instead (DistilBERT's ``sinusoidal_pos_embds``), still trainable.

    With ``padding_idx`` positions are numbered as fairseq and RoBERTa number them, from the token ids: the
    k-th token that is not ``padding_idx`` is at position k - 1 (row ``offset + k - 1``), and every padding
    token reads row ``offset - 1`` (RoBERTa: ``offset = padding_idx + 1``, so padding reads row padding_idx).
    """

    def __init__(
        self,
        d_model: int,
        *,
        max_len: int,
        offset: int = 0,
        padding_idx: int | None = None,
        sinusoidal_init: bool = False,
        init_std: float = 0.02,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if padding_idx is not None and offset < 1:
            raise ValueError("padding-aware positions read row offset - 1 for padding: offset must be >= 1")
        self.init_std = init_std
        self.offset = offset
        self.padding_idx = padding_idx
        self.sinusoidal_init = sinusoidal_init
        self.embedding = nn.Embedding(max_len + offset, d_model, device=device, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.sinusoidal_init:
            if not self.embedding.weight.is_meta:
                with torch.no_grad():
                    self.embedding.weight.copy_(sinusoid_table(*self.embedding.weight.shape))
            return
        nn.init.normal_(self.embedding.weight, std=self.init_std)

    def positions_from_ids(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        if self.padding_idx is None:
            return None
        real = input_ids.ne(self.padding_idx).long()
        return real.cumsum(-1) * real - 1  # (N, L): k - 1 for the k-th real token, -1 for padding

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x + self.embedding(positions + self.offset if self.offset else positions)  # (N, L, E)


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


class NoPositionalConfig(PositionalConfig):
    type: Literal["none"] = "none"
    style: ClassVar[str] = "none"


class SinusoidalConfig(PositionalConfig):
    # The table has max_len rows, so positions past it have no encoding (see SinusoidalEncoding).
    bounded_by_max_len: ClassVar[bool] = True

    type: Literal["sinusoidal"] = "sinusoidal"
    base: float = Field(10000.0, gt=1, description="Wavelength scale: pair i has wavelength 2π·base^(2i/E).")
    offset: int = Field(
        0, ge=0, le=MAX_POSITIONS, description="Position p reads row p + offset of max_len + offset rows (M2M-100: 2)."
    )
    padding_idx: int | None = Field(
        None,
        ge=0,
        description="Number positions from the token ids, skipping this id (M2M-100: 1, with offset 2): padding "
        "reads row offset - 1, which is zero. Default positions 0 .. L-1.",
    )
    layout: Literal["interleaved", "fairseq"] = Field(
        "interleaved",
        description="interleaved: sin, cos of each pair side by side at speeds base^(-2i/E); fairseq (M2M-100): all "
        "sines then all cosines at speeds base^(-i/(E/2 - 1)).",
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"base": 100.0},
        {"layout": "fairseq", "offset": 2, "padding_idx": 1},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        problems = []
        if ctx.d_model % 2:
            problems.append(f"sinusoidal encoding needs an even d_model, got {ctx.d_model}")
        if ctx.max_len < 1:
            problems.append(f"sinusoidal encoding needs max_len >= 1, got {ctx.max_len}")
        if self.layout == "fairseq" and ctx.d_model < 4:
            problems.append(f"layout fairseq needs d_model >= 4 (its speeds divide by E/2 - 1), got {ctx.d_model}")
        if self.padding_idx is not None and self.offset < 1:
            problems.append("padding_idx: padding reads row offset - 1, so offset must be >= 1 (M2M-100: 2)")
        return problems


class LearnedConfig(PositionalConfig):
    bounded_by_max_len: ClassVar[bool] = True

    type: Literal["learned"] = "learned"
    offset: int = Field(
        0, ge=0, le=MAX_POSITIONS, description="Position p reads row p + offset of max_len + offset rows (OPT: 2)."
    )
    padding_idx: int | None = Field(
        None,
        ge=0,
        description="Number positions from the token ids, skipping this id (RoBERTa: 1, with offset 2): padding "
        "reads row offset - 1. Encoders only; default positions 0 .. L-1.",
    )
    sinusoidal_init: bool = Field(
        False, description="Initialise the table with sinusoids instead of N(0, init_std) (DistilBERT)."
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"offset": 2},
        {"offset": 1, "padding_idx": 0},
        {"sinusoidal_init": True},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        problems = [] if ctx.max_len >= 1 else [f"learned positional encoding needs max_len >= 1, got {ctx.max_len}"]
        if self.padding_idx is not None and self.offset < 1:
            problems.append("padding_idx: padding reads row offset - 1, so offset must be >= 1 (RoBERTa: 2)")
        if self.padding_idx is not None and ctx.causal:
            problems.append(
                "padding_idx: positions numbered from the token ids are an encoder's (architecture: encoder)"
            )
        if self.sinusoidal_init and ctx.d_model % 2:
            problems.append(f"sinusoidal_init needs an even d_model, got {ctx.d_model}")
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        return Cost(params=(ctx.max_len + self.offset) * ctx.d_model)


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


class ALiBiConfig(PositionalConfig):
    type: Literal["alibi"] = "alibi"
    style: ClassVar[str] = "bias"


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


@hookimpl
def register_components(register):
    register("positional", "none", NoPositionalEncoding, NoPositionalConfig)
    register("positional", "sinusoidal", SinusoidalEncoding, SinusoidalConfig)
    register("positional", "learned", LearnedEncoding, LearnedConfig)
    register("positional", "rope", RotaryEmbedding, RopeConfig)
    register("positional", "alibi", ALiBi, ALiBiConfig)
    register("positional", "t5_relative", T5RelativeBias, T5RelativeConfig)
