"""Every limit zoo puts on what it is given, in one place: the ranges of the numbers users give zoo's functions
(and, through them, the ``zoo`` command), and what a recipe may ask for (the README's "Writing recipes" lists
those).

Each check takes one argument and returns it, or raises ``ArgumentError`` naming the argument, its range
and the value given: Python callers and the CLI get the same message, and no out-of-range number reaches
torch (where a 26-digit seed overflows and an infinite temperature silently samples uniformly).

The recipe limits are generous (each is well above any published model) but finite, so that nothing a user
types, installs or loads can hang zoo, exhaust its memory or overflow its stack: a recipe past one is refused
with a message that names the limit, before any tensor exists. Components declare their ranges with them.

No torch here, and nothing of zoo but its errors: every layer may import this module.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from .errors import ArgumentError

MAX_SEED = 2**63 - 1
"""Seeds are 0 .. 2^63 - 1: what every torch generator accepts."""
MAX_SIZE = 2**31 - 1
"""The largest count (batch, sequence length, steps, intervals...): beyond any real use, inside tensor shapes."""


def check_int(name: str, value: Any, *, low: int = 0, high: int = MAX_SIZE) -> int:
    """``value`` as an int in ``[low, high]`` (a bool is not an int here)."""
    if isinstance(value, bool):
        raise ArgumentError(f"{name} must be an integer, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ArgumentError(f"{name} must be an integer, got {value!r}") from None
    if not low <= number <= high:
        raise ArgumentError(f"{name} must be >= {low} and <= {_bound(high)}, got {number}")
    return number


def check_float(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a finite float in the interval given (``low_open``: ``low`` itself excluded)."""
    if isinstance(value, bool):
        raise ArgumentError(f"{name} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ArgumentError(f"{name} must be a number, got {value!r}") from None
    interval = (
        f"{'(' if low_open or low is None else '['}{'-inf' if low is None else low}, "
        f"{'inf' if high is None else high}{')' if high_open or high is None else ']'}"
    )
    if not math.isfinite(number):
        raise ArgumentError(f"{name} must be a finite number in {interval}, got {value!r}")
    below = low is not None and (number <= low if low_open else number < low)
    above = high is not None and (number >= high if high_open else number > high)
    if below or above:
        raise ArgumentError(f"{name} must be in {interval}, got {value!r}")
    return number


def _bound(n: int) -> str:
    return {MAX_SEED: "2^63 - 1", MAX_SIZE: "2^31 - 1"}.get(n, f"{n:,}")


def count_argument(low: int = 1, high: int = MAX_SIZE) -> Any:
    """An ``argparse`` type for a count in ``[low, high]`` (the tools' ``--rounds``, ``--steps``...)."""
    import argparse

    def parse(text: str) -> int:
        try:
            return check_int("the value", int(text), low=low, high=high)
        except (ValueError, ArgumentError) as exc:
            message = str(exc) if isinstance(exc, ArgumentError) else f"expected an integer, got {text!r}"
            raise argparse.ArgumentTypeError(message) from None

    return parse


# ---------------------------------------------------------------------------------------------- recipe files

MAX_FILE_BYTES = 1 << 20
"""A recipe file is read up to 1 MiB; a longer one is refused (the largest shipped recipe is < 2 KiB)."""
MAX_NESTING = 32
"""Mappings and lists nest at most this deep in a recipe (aliases expanded); shipped recipes nest 3 deep."""
MAX_NODES = 100_000
"""Values (scalars, mappings, lists) in one recipe, its YAML aliases expanded: this refuses alias bombs."""
MAX_ALIASES = 256
"""YAML aliases (``*name``) in one recipe file."""
MAX_INT_DIGITS = 40
"""Digits of an integer literal; a longer one is no size at all (Python refuses to parse > 4,300 digits)."""
MAX_EXTENDS = 32
"""Files in one ``extends`` chain, the recipe itself included."""
MAX_REF_CHARS = 1024
"""Characters of an ``extends`` reference (a recipe name or path)."""
MAX_NAME_CHARS = 256
"""Characters of a recipe's ``name``."""

# ---------------------------------------------------------------------------------------------- recipe sizes

MAX_LAYERS = 1024
"""Blocks in one stack (``num_layers``, ``num_decoder_layers``), and entries of ``layers:``."""
MAX_D_MODEL = 65_536
"""Width of the residual stream (``d_model``)."""
MAX_WIDTH = 1 << 20
"""A hidden width: an FFN's ``hidden`` and ``multiple_of``."""
MAX_HEAD_DIM = 65_536
"""Features per attention head (``head_dim``)."""
MAX_HEADS = 4096
"""Attention heads, query or key/value (``num_heads``, ``num_kv_heads``)."""
MAX_EXPERTS = 4096
"""Experts of one mixture-of-experts layer (``num_experts`` of an FFN or of attention heads)."""
MAX_MODEL_EXPERTS = 65_536
"""Routed experts in the whole model, summed over its layers: each is a module to build."""
MAX_VOCAB = 1 << 24
"""Token, segment and class vocabularies (``vocab_size``, ``type_vocab_size``, ``num_classes``)."""
MAX_POSITIONS = 1 << 24
"""Positions: ``max_len``, RoPE's ``original_max_len``, T5's ``num_buckets`` and ``max_distance``."""
MAX_IMAGE_SIZE = 16_384
"""Side of an input image or patch in pixels (``image_size``, ``patch_size``)."""
MAX_CHANNELS = 1024
"""Image channels (``num_channels``)."""
