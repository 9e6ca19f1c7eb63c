"""Every limit on what a recipe may ask for, in one place (the README's "Writing recipes" lists them).

The limits are generous (each is well above any published model) but finite, so that nothing a user types,
installs or loads can hang zoo, exhaust its memory or overflow its stack: a recipe past one is refused with
a message that names the limit, before any tensor exists. This module imports nothing.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------------------------- files

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

# ---------------------------------------------------------------------------------------------- sizes

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
MAX_POSITIONS = 1 << 20
"""Positions: ``max_len``, RoPE's ``original_max_len``, T5's ``num_buckets`` and ``max_distance``."""
MAX_IMAGE_SIZE = 16_384
"""Side of an input image or patch in pixels (``image_size``, ``patch_size``)."""
MAX_CHANNELS = 1024
"""Image channels (``num_channels``)."""
