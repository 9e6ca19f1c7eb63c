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

One module per encoding (``none``, ``sinusoidal``, ``learned``, ``rope``, ``alibi``, ``t5_relative``,
``t5_global_relative``: T5's bias and a table towards LongT5's global tokens, ``relative_2d``: BEiT's 2-D bias,
``learned_relative``: learned positions with T5's bias, ``deberta_relative``: DeBERTa's relative table, which its
disentangled attention reads), ``base`` for what they share and ``rope_scaling`` for RoPE's long-context scalings;
this package re-exports them all and registers every encoding.
"""

from __future__ import annotations

from zoo.hookspecs import hookimpl

from .alibi import ALiBi, ALiBiConfig, alibi_slopes
from .base import PositionalConfig, PositionalEncoding, inverse_frequencies, positions_for, sinusoid_table
from .deberta_relative import DebertaRelativeConfig, DebertaRelativeEmbedding, deberta_bucket
from .learned import LearnedConfig, LearnedEncoding
from .learned_relative import LearnedRelativeConfig, LearnedRelativeEncoding
from .none import NoPositionalConfig, NoPositionalEncoding
from .relative_2d import Relative2DBias, Relative2DConfig, relative_2d_index
from .rope import RopeConfig, RotaryEmbedding, rotary_dims, rotary_problem
from .rope_scaling import (
    SCALINGS,
    longrope_attention_factor,
    scale_frequencies,
    yarn_attention_factor,
    yarn_mscale,
)
from .sinusoidal import SinusoidalConfig, SinusoidalEncoding, fairseq_sinusoid_table
from .t5_global_relative import T5GlobalRelativeBias, T5GlobalRelativeConfig
from .t5_relative import T5RelativeBias, T5RelativeConfig, relative_position_bucket, t5_bucket_problem

__all__ = [
    "ALiBi",
    "ALiBiConfig",
    "DebertaRelativeConfig",
    "DebertaRelativeEmbedding",
    "LearnedConfig",
    "LearnedEncoding",
    "LearnedRelativeConfig",
    "LearnedRelativeEncoding",
    "NoPositionalConfig",
    "NoPositionalEncoding",
    "PositionalConfig",
    "PositionalEncoding",
    "Relative2DBias",
    "Relative2DConfig",
    "RopeConfig",
    "RotaryEmbedding",
    "SCALINGS",
    "SinusoidalConfig",
    "SinusoidalEncoding",
    "T5RelativeBias",
    "T5RelativeConfig",
    "T5GlobalRelativeBias",
    "T5GlobalRelativeConfig",
    "alibi_slopes",
    "deberta_bucket",
    "fairseq_sinusoid_table",
    "inverse_frequencies",
    "longrope_attention_factor",
    "positions_for",
    "relative_2d_index",
    "register_components",
    "relative_position_bucket",
    "rotary_dims",
    "rotary_problem",
    "scale_frequencies",
    "sinusoid_table",
    "t5_bucket_problem",
    "yarn_attention_factor",
    "yarn_mscale",
]


@hookimpl
def register_components(register):
    register("positional", "none", NoPositionalEncoding, NoPositionalConfig)
    register("positional", "sinusoidal", SinusoidalEncoding, SinusoidalConfig)
    register("positional", "learned", LearnedEncoding, LearnedConfig)
    register("positional", "rope", RotaryEmbedding, RopeConfig)
    register("positional", "alibi", ALiBi, ALiBiConfig)
    register("positional", "t5_relative", T5RelativeBias, T5RelativeConfig)
    register("positional", "t5_global_relative", T5GlobalRelativeBias, T5GlobalRelativeConfig)
    register("positional", "learned_relative", LearnedRelativeEncoding, LearnedRelativeConfig)
    register("positional", "deberta_relative", DebertaRelativeEmbedding, DebertaRelativeConfig)
    register("positional", "relative_2d", Relative2DBias, Relative2DConfig)
