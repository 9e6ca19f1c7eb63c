"""Mistral (``MistralForCausalLM``): Llama's network (RMSNorm pre-norm decoder, RoPE, grouped-query attention,
SwiGLU, no biases) with sliding-window attention: every query sees the ``sliding_window`` most recent keys,
itself included (zoo's attention ``window``; ``sliding_window: null`` attends to every key).

The weight table, options and export are Llama's (``zoo/hf/llama.py``).
"""

from __future__ import annotations

from typing import Any

from .llama import (
    ACTS,
    COMMON_REQUIREMENTS,
    GATED,
    IGNORED,
    LLAMA_DEFAULTS,
    LLAMA_OPTIONS,
    LLAMA_RULES,
    _config,
    _recipe,
)
from .mapping import Family

MISTRAL_DEFAULTS: dict[str, Any] = {
    **{k: v for k, v in LLAMA_DEFAULTS.items() if k not in ("attention_bias", "mlp_bias")},
    "intermediate_size": 14336,
    "num_key_value_heads": 8,
    "max_position_embeddings": 4096 * 32,
    "sliding_window": 4096,
}
"""MistralConfig's defaults (it has no attention_bias or mlp_bias: Mistral's projections never have biases)."""


def mistral_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    ffn = {**GATED[config["hidden_act"]], "hidden": config["intermediate_size"], "bias": False}
    recipe = _recipe(config, ffn, False)
    if config["sliding_window"] is not None:
        recipe["attention"]["window"] = config["sliding_window"]
    return recipe


def mistral_config(recipe, weights) -> dict[str, Any]:
    return {
        **_config(recipe, weights, recipe.ffn, "blocks.0.ffn.up_proj.weight"),
        "sliding_window": recipe.attention.window,
    }


MISTRAL = Family(
    name="mistral",
    model_type="mistral",
    classes=("MistralForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=MISTRAL_DEFAULTS,
    options=LLAMA_OPTIONS,
    rules=LLAMA_RULES,
    ignored=IGNORED,
    requirements={
        **COMMON_REQUIREMENTS,
        "attention.bias": False,
        "ffn.type": tuple(ACTS),
        "ffn.bias": False,
    },
    recipes=("mistral-7b-v0.1",),
    recipe=mistral_recipe,
    config=mistral_config,
    hf_class=lambda recipe: "MistralForCausalLM",
)
