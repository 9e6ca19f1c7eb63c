"""Gemma 3, text only (``Gemma3ForCausalLM``, model_type ``gemma3_text``): Gemma 2's layout with QK-norm (a
(1 + w) RMSNorm over each head's features, before the rotation) in place of the score cap, five local layers to
one global (``sliding_window_pattern: 6``, or ``layer_types``), and a rope of its own for each kind: local layers
rotate with base 10,000 (``rope_local_base_freq``), global ones with 1,000,000 (``rope_theta``), optionally
scaled (``rope_scaling``, global layers only; any kind in ``rope_parameters``). transformers 5 reads YaRN's
``truncate`` from the top of the nested ``rope_parameters``, where it never is: Gemma 3's YaRN always truncates.

transformers 5 keeps both ropes in ``rope_parameters`` (``{sliding_attention: ..., full_attention: ...}``); both
that and transformers 4's keys import. The recipe's attention and positional are those of the more common kind
(the local layers); the other layers override the attention with their own ``rotary``.
"""

from __future__ import annotations

from typing import Any

from ._llama_legacy import LLAMA_OPTIONS
from .gemma import (
    CAUSAL,
    GEMMA_DEFAULTS,
    GLOBAL,
    IGNORED,
    LOCAL,
    SANDWICH_REQUIREMENTS,
    SANDWICH_RULES,
    activation_option,
    gated_ffn,
    layer_ropes,
    layer_types,
    layer_types_option,
    local_global,
    plan_problems,
    sandwich_config,
    sandwich_recipe,
)
from .mapping import Family, Option
from .rope import ROPE_SCALINGS, ROPE_TYPE_WHY, hf_rope_parameters, rope_spec

DEFAULTS: dict[str, Any] = {
    **{k: v for k, v in GEMMA_DEFAULTS.items() if k != "hidden_act"},
    "vocab_size": 262208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131072,
    "rope_theta": 1_000_000.0,  # transformers 4: the global layers' base
    "rope_local_base_freq": 10_000.0,  # transformers 4: the local layers' base
    "query_pre_attn_scalar": 256,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
    "layer_types": None,
    "final_logit_softcapping": None,
    "use_bidirectional_attention": False,
}


def _rope_type_option(kind: str) -> Option:
    return Option(
        f"rope_parameters.{kind}.rope_type",
        lambda v: v is None or v in ROPE_SCALINGS,
        ROPE_TYPE_WHY,
    )


def _rotation_option(kind: str) -> Option:
    return Option(
        f"rope_parameters.{kind}.partial_rotary_factor",
        lambda v: v in (None, 1.0),
        "Gemma 3's attention rotates every head dim",
    )


OPTIONS = (
    *(o for o in LLAMA_OPTIONS if o.key == "rope_scaling"),
    *(option(kind) for kind in (LOCAL, GLOBAL) for option in (_rope_type_option, _rotation_option)),
    activation_option("hidden_activation", {}),
    layer_types_option("Gemma 3"),
    CAUSAL,
)


def ropes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The zoo rope of each kind of layer, as transformers' ``Gemma3TextConfig`` assembles them: its
    ``rope_parameters``, else ``rope_theta`` (global), ``rope_local_base_freq`` (local) and ``rope_scaling``
    (global layers only)."""
    given = config["rope_parameters"] or {}
    out = {}
    for kind, base in ((GLOBAL, config["rope_theta"]), (LOCAL, config["rope_local_base_freq"])):
        params = dict(given.get(kind) or {"rope_type": "default"})
        if kind == GLOBAL and config["rope_scaling"]:
            params.update(config["rope_scaling"])
        params.setdefault("rope_theta", base)
        # Nested parameters: transformers reads no top-level original_max_position_embeddings, and truncates.
        spec = rope_spec({**config, "original_max_position_embeddings": None}, params)
        spec.pop("truncate", None)
        out[kind] = spec
    return out


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    out = sandwich_recipe(config, gated_ffn(config["hidden_activation"], config["intermediate_size"]))
    out["attention"]["qk_norm"] = {"type": "rmsnorm", "eps": config["rms_norm_eps"], "offset": 1.0}
    types = layer_types(config, pattern=config["sliding_window_pattern"])
    return {**out, **local_global(types, out["attention"], config["sliding_window"], ropes(config))}


def config(recipe, weights) -> dict[str, Any]:
    out = sandwich_config(recipe, weights)
    out.pop("rope_theta")
    kinds = dict.fromkeys((LOCAL, GLOBAL), recipe.positional)  # a kind no layer has: the stack's rope
    for kind, rope in zip(out["layer_types"], layer_ropes(recipe), strict=True):
        kinds[kind] = rope
    return {
        **out,
        "rope_parameters": {kind: hf_rope_parameters(rope) for kind, rope in kinds.items()},
        "attn_logit_softcapping": None,
    }


def _qk_norm(recipe) -> str | None:
    """A requirement: queries and keys normalised per head by Gemma's (1 + w) RMSNorm at the model's eps."""
    attention = recipe.attention
    norm = attention.qk_norm
    fits = (
        norm is not None
        and norm.type == "rmsnorm"
        and norm.affine
        and norm.offset == 1.0
        and norm.eps == recipe.norm.eps
        and attention.qk_norm_scope == "head"
    )
    if not fits:
        return (
            f"attention.qk_norm is {None if norm is None else norm.model_dump()} (scope {attention.qk_norm_scope}), "
            f"needs {{type: rmsnorm, eps: {recipe.norm.eps}, offset: 1.0}} per head (Gemma 3's q_norm and k_norm)"
        )
    return None


def _truncated(recipe) -> str | None:
    """A requirement: every YaRN rope truncates (transformers' Gemma 3 does, whatever its parameters say)."""
    if any(rope.scaling == "yarn" and not rope.truncate for rope in layer_ropes(recipe)):
        return "a yarn rope has truncate False; transformers' Gemma 3 always truncates YaRN's ramp"
    return None


REQUIREMENTS = {
    **SANDWICH_REQUIREMENTS,
    "positional.truncate": _truncated,
    "attention.softcap": None,  # transformers' Gemma 3 applies no score cap
    "attention.qk_norm": _qk_norm,
    "layers": lambda recipe: plan_problems(recipe, one_rope=False),
}

GEMMA3 = Family(
    name="gemma3",
    model_type="gemma3_text",
    classes=("Gemma3ForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=SANDWICH_RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    unread={
        "attn_logit_softcapping": "transformers' Gemma 3 attention never applies it (QK-norm took the score cap's "
        "place), so zoo leaves the scores uncapped as transformers does",
        "_sliding_window_pattern": "transformers' copy of sliding_window_pattern; the layer_types written beside it "
        "say which layers are local, as transformers reads them",
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "Gemma3ForCausalLM",
    recipes=("gemma-3-1b",),
)
