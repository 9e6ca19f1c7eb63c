"""Granite (``GraniteForCausalLM``, IBM Granite 3.x dense): Llama's network with four constant multipliers (muP):
the embeddings times ``embedding_multiplier`` (the token embedding's ``multiplier``), each sub-layer's output times
``residual_multiplier`` before it joins the stream (the block's), the attention's softmax scale
``attention_multiplier`` in place of 1/sqrt(head_dim) (the attention's ``scale``), and the logits divided by
``logits_scaling`` (the LM head's ``logit_divisor``).
"""

from __future__ import annotations

from typing import Any

from .llama import LLAMA
from .table import Computed, Key


def _hf_scale(recipe: Any, weights: Any) -> dict[str, Any]:
    scale = recipe.attention.scale  # None: zoo's default, 1/sqrt(head_dim), which Granite states outright
    return {"attention_multiplier": recipe.attention.head_dim_for(recipe.d_model) ** -0.5 if scale is None else scale}


GRANITE = LLAMA.derive(
    "granite",
    classes=("GraniteForCausalLM",),
    recipes=("granite-3.0-2b",),
    drop=("pretraining_tp", "sliding_window"),
    rows=(
        Key("embedding_multiplier", "embedding.multiplier", 1.0),
        Key("residual_multiplier", "block.residual_multiplier", 1.0),
        Computed(
            "attention multiplier",
            keys={"attention_multiplier": 1.0},
            paths=("attention.scale",),
            read=lambda config, recipe: {"attention.scale": config["attention_multiplier"]},
            write=_hf_scale,
        ),
        Key("logits_scaling", "head.logit_divisor", 1.0),
    ),
)
