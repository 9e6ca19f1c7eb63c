"""Gemma 2 (``Gemma2ForCausalLM``): Gemma with sandwich norms (after attention and after the FFN too), scores
scaled by ``query_pre_attn_scalar ** -0.5`` and soft-capped at ``attn_logit_softcapping``, final logits soft-capped
at ``final_logit_softcapping``, and local (sliding-window) layers alternating with global ones, local first.

The layers of the less common kind (the local ones on a tie, as in every Gemma 2) are ``layers:`` overrides of the
recipe's attention; all layers share one rope (``rope_parameters``).
"""

from __future__ import annotations

from typing import Any

from .gemma import (
    CAUSAL,
    GEMMA_DEFAULTS,
    IGNORED,
    ROPE_OPTIONS,
    SANDWICH_REQUIREMENTS,
    SANDWICH_RULES,
    activation_option,
    gated_ffn,
    layer_types,
    layer_types_option,
    local_global,
    plan_problems,
    sandwich_config,
    sandwich_recipe,
)
from .mapping import Family
from .rope import rope_spec

DEFAULTS: dict[str, Any] = {
    **{k: v for k, v in GEMMA_DEFAULTS.items() if k != "hidden_act"},
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "hidden_activation": "gelu_pytorch_tanh",
    "query_pre_attn_scalar": 256,
    "sliding_window": 4096,
    "layer_types": None,
    "final_logit_softcapping": 30.0,
    "attn_logit_softcapping": 50.0,
}

OPTIONS = (*ROPE_OPTIONS, activation_option("hidden_activation", {}), layer_types_option("Gemma 2"), CAUSAL)


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    out = sandwich_recipe(config, gated_ffn(config["hidden_activation"], config["intermediate_size"]))
    if config["attn_logit_softcapping"] is not None:
        out["attention"]["softcap"] = float(config["attn_logit_softcapping"])
    rope = rope_spec(config)
    types = layer_types(config, pattern=2)  # transformers' default: local, global, local, ...
    return {**out, **local_global(types, out["attention"], config["sliding_window"], {t: rope for t in set(types)})}


def config(recipe, weights) -> dict[str, Any]:
    return {**sandwich_config(recipe, weights), "attn_logit_softcapping": recipe.attention.softcap}


REQUIREMENTS = {
    **SANDWICH_REQUIREMENTS,
    "attention.qk_norm": None,
    "layers": lambda recipe: plan_problems(recipe, one_rope=True),
}

GEMMA2 = Family(
    name="gemma2",
    model_type="gemma2",
    classes=("Gemma2ForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=SANDWICH_RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "Gemma2ForCausalLM",
    recipes=("gemma-2-2b",),
)
