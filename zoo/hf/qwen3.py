"""Qwen3 (``Qwen3ForCausalLM``): Qwen2's network with QK-norm, an RMSNorm over each head's ``head_dim``
features of the queries and of the keys (before RoPE), one ``attention_bias`` for all four projections (off
in the published models) and ``head_dim`` 128 by default. Sliding-window layers as in Qwen2
(``zoo/hf/qwen2.py``, whose helpers this file uses).
"""

from __future__ import annotations

from typing import Any

from .llama import GATED, IGNORED, LLAMA_DEFAULTS, LLAMA_OPTIONS, LLAMA_RULES, _config, _recipe
from .mapping import Family, Rule
from .qwen2 import (
    LAYERED_REQUIREMENTS,
    WINDOW_DEFAULTS,
    WINDOW_OPTIONS,
    hf_sliding_layers,
    sliding_layers,
    with_sliding_layers,
)

QWEN3_DEFAULTS: dict[str, Any] = {
    **{k: v for k, v in LLAMA_DEFAULTS.items() if k != "mlp_bias"},
    "vocab_size": 151936,
    "intermediate_size": 22016,
    "num_key_value_heads": 32,
    "head_dim": 128,
    "max_position_embeddings": 32768,
    **WINDOW_DEFAULTS,
}
"""Qwen3Config's defaults (its MLP never has biases: no mlp_bias)."""

QWEN3_RULES = (
    *LLAMA_RULES,
    Rule("model.layers.{i}.self_attn.q_norm.weight", "blocks.{i}.attention.q_norm.weight"),
    Rule("model.layers.{i}.self_attn.k_norm.weight", "blocks.{i}.attention.k_norm.weight"),
)


def qk_norm_is_the_norm(recipe: Any) -> str | None:
    """A requirement: per-head QK-norm by the recipe's own RMSNorm (Qwen3 builds both with ``rms_norm_eps``)."""
    attention = recipe.attention
    qk_norm = attention.qk_norm
    spec = None if qk_norm is None else qk_norm.model_dump()
    if qk_norm != recipe.norm or attention.qk_norm_scope != "head":
        return (
            f"attention.qk_norm is {spec!r} over {attention.qk_norm_scope!r}, needs the recipe's norm "
            f"({recipe.norm.model_dump()}) over each head (Qwen3's q_norm and k_norm)"
        )
    return None


def one_bias(recipe: Any) -> str | None:
    """A requirement: all four projections biased, or none (Qwen3's one ``attention_bias``)."""
    on = recipe.attention.biases()
    return None if len(set(on.values())) == 1 else f"attention biases are {on}, need all or none (attention_bias)"


def qwen3_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    ffn = {**GATED[config["hidden_act"]], "hidden": config["intermediate_size"], "bias": False}
    recipe = _recipe(config, ffn, bool(config["attention_bias"]))
    recipe["attention"]["qk_norm"] = {"type": "rmsnorm", "eps": config["rms_norm_eps"]}  # qk_norm_scope: head
    return with_sliding_layers(recipe, *sliding_layers(config))


def qwen3_config(recipe, weights) -> dict[str, Any]:
    return {
        **_config(recipe, weights, recipe.ffn, "blocks.0.ffn.up_proj.weight"),
        "attention_bias": recipe.attention.biases()["q"],
        **hf_sliding_layers(recipe),
    }


QWEN3 = Family(
    name="qwen3",
    model_type="qwen3",
    classes=("Qwen3ForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=QWEN3_DEFAULTS,
    options=(*LLAMA_OPTIONS, *WINDOW_OPTIONS),
    rules=QWEN3_RULES,
    ignored=IGNORED,
    requirements={**LAYERED_REQUIREMENTS, "attention.qk_norm": qk_norm_is_the_norm, "attention.biases": one_bias},
    recipes=("qwen3-0.6b",),
    recipe=qwen3_recipe,
    config=qwen3_config,
    hf_class=lambda recipe: "Qwen3ForCausalLM",
)
