"""Every limit on what a recipe may ask for: ``zoo.limits`` holds them (beside the ranges of function arguments);
this module names the recipe's ones, for plugins that import them from here."""

from __future__ import annotations

from zoo.limits import (
    MAX_ALIASES,
    MAX_CHANNELS,
    MAX_D_MODEL,
    MAX_EXPERTS,
    MAX_EXTENDS,
    MAX_FILE_BYTES,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_IMAGE_SIZE,
    MAX_INT_DIGITS,
    MAX_LAYERS,
    MAX_MODEL_EXPERTS,
    MAX_NAME_CHARS,
    MAX_NESTING,
    MAX_NODES,
    MAX_POSITIONS,
    MAX_REF_CHARS,
    MAX_VOCAB,
    MAX_WIDTH,
)

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_NESTING",
    "MAX_NODES",
    "MAX_ALIASES",
    "MAX_INT_DIGITS",
    "MAX_EXTENDS",
    "MAX_REF_CHARS",
    "MAX_NAME_CHARS",
    "MAX_LAYERS",
    "MAX_D_MODEL",
    "MAX_WIDTH",
    "MAX_HEAD_DIM",
    "MAX_HEADS",
    "MAX_EXPERTS",
    "MAX_MODEL_EXPERTS",
    "MAX_VOCAB",
    "MAX_POSITIONS",
    "MAX_IMAGE_SIZE",
    "MAX_CHANNELS",
]
