"""The sequence length ``zoo plan`` and ``zoo summary`` assume when not told, and the line that says why."""

from __future__ import annotations

from typing import Any

USUAL_SEQ = 4096
"""Tokens per training sequence assumed for a recipe whose ``train.seq_len`` is unset: the usual pretraining
length, not ``max_len`` (131,072 for Llama 3.2 would plan a run nobody makes)."""


def default_seq_len(recipe: Any) -> tuple[int, str]:
    """The tokens per sequence to plan at, and where that number comes from.

    ``train.seq_len`` when the recipe sets it; a vision model's patch count; else 4096, capped at ``max_len`` (an
    encoder-decoder's target at ``max_len - 1``, leaving its [eos] a position).
    """
    if recipe.architecture == "vit":
        return recipe.max_len or 1, f"a vision model sees {recipe.max_len} tokens per image (patches + CLS)"
    if recipe.train.seq_len is not None:
        return recipe.train.seq_len, "train.seq_len"
    if recipe.max_len is not None and recipe.max_len <= USUAL_SEQ and recipe.architecture == "encoder-decoder":
        fits = recipe.max_len - 1  # the target's [eos] takes a decoder position too
        return max(fits, 1), f"train.seq_len is unset: max_len - 1 ({fits:,}), a target and its [eos] in max_len"
    if recipe.max_len is not None and recipe.max_len <= USUAL_SEQ:
        return recipe.max_len, f"train.seq_len is unset: max_len ({recipe.max_len:,}), as zoo train takes it"
    trainer = f" (zoo train would take max_len, {recipe.max_len:,})" if recipe.max_len else ""
    return USUAL_SEQ, f"train.seq_len is unset{trainer}; --seq to change"
