"""Gemma (``GemmaForCausalLM``): Llama's table with a (1 + w) RMSNorm computed in float32 (``norm.offset: 1.0``),
token embeddings times ``sqrt(hidden_size)`` rounded to the weights' dtype (``embedding: {scale, round_scale}``), and
GeGLU with the tanh GELU (transformers reads Gemma's legacy ``hidden_act: gelu`` as tanh, and so does zoo). Below,
the rows Gemma 2 and 3 share (sandwich norms, the score scale); their local and global layers are in layer_kinds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .layer_kinds import GLOBAL, LOCAL, layer_types_option, local_global
from .llama import ATTENTION, BLOCK, COMMON, LAYER, LLAMA, LLAMA_RULES
from .mapping import Option, Rule
from .rows import gated_ffn
from .table import Computed, Fixed, Require

__all__ = ["GEMMA", "GLOBAL", "LOCAL", "layer_types_option", "local_global"]  # ModernBERT's imports from here

GATED_FFN = gated_ffn()


def _legacy_gelu(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """Quirk: transformers' GemmaConfig reads Gemma 1's ``hidden_act: gelu`` as the tanh GELU (Gemma 2, 3 do not)."""
    act = config["hidden_act"]
    return GATED_FFN.read({**config, "hidden_act": "gelu_pytorch_tanh" if act == "gelu" else act}, recipe)


def tanh_gelu(recipe: Any) -> str | None:
    """A requirement of Gemma 1: a GeGLU's GELU is the tanh one (its config's ``gelu`` means tanh)."""
    if recipe.ffn.type == "geglu" and recipe.ffn.approximate != "tanh":
        return "ffn.approximate is 'none', needs 'tanh' (Gemma's hidden_act 'gelu' is read as the tanh GELU)"
    return None


GEMMA = LLAMA.derive(
    "gemma",
    classes=("GemmaForCausalLM",),
    recipes=("gemma-2b",),
    drop=("mlp_bias", "pretraining_tp", "sliding_window"),
    rows=(
        Fixed("embedding.scale", True),
        Fixed("embedding.round_scale", True),
        Fixed("norm.offset", 1.0),
        replace(GATED_FFN, read=_legacy_gelu),
        Require("ffn.approximate", tanh_gelu),
        Fixed("ffn.bias", False),
        Option(
            "use_bidirectional_attention",
            lambda v: not v,
            "zoo's decoder is causal; a bidirectional Gemma is an encoder, which this family does not import",
        ),
    ),
    defaults={"vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28}
    | {"num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh"}
    | {"max_position_embeddings": 8192, "pad_token_id": 0, "tie_word_embeddings": True},
)

# ---------------------------------------------------------------------------------------------- Gemma 2 and 3

SANDWICH_RULES = (
    *COMMON[:2],  # the embeddings, the attention's input norm
    *ATTENTION,
    *(Rule(f"{LAYER}.self_attn.{p}_norm.weight", f"{BLOCK}.attention.{p}_norm.weight") for p in "qk"),  # Gemma 3
    Rule(f"{LAYER}.post_attention_layernorm.weight", f"{BLOCK}.attention_post_norm.weight"),
    Rule(f"{LAYER}.pre_feedforward_layernorm.weight", f"{BLOCK}.ffn_norm.weight"),
    *(r for r in LLAMA_RULES if ".mlp." in r.hf_names[0]),
    Rule(f"{LAYER}.post_feedforward_layernorm.weight", f"{BLOCK}.ffn_post_norm.weight"),
    *COMMON[-2:],  # the final norm and the head (only when untied)
)
"""Gemma 2 and 3: a norm before and after each sub-layer (``post_attention_layernorm`` is the one *after*
attention here, where in Gemma and Llama it is the FFN's input norm)."""


def renamed(row: Computed, **names: str) -> Computed:
    """``row`` reading and writing config keys under other names (``hidden_activation="hidden_act"``: Gemma 2's
    key for what Gemma's row calls ``hidden_act``)."""
    theirs = {old: new for new, old in names.items()}

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        return row.read({**config, **{old: config[new] for new, old in names.items()}}, recipe)

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        return {theirs.get(k, k): v for k, v in row.write(recipe, weights).items()}

    return replace(row, keys={theirs.get(k, k): v for k, v in row.keys.items()}, read=read, write=write)


def attention_scale(config: dict[str, Any]) -> float | None:
    """The score scale ``query_pre_attn_scalar ** -0.5``; None where that is zoo's default 1/sqrt(head_dim)."""
    scalar = config["query_pre_attn_scalar"]
    head_dim = config["head_dim"] or config["hidden_size"] // config["num_attention_heads"]
    return None if scalar == head_dim else float(scalar) ** -0.5


def query_pre_attn_scalar(recipe: Any) -> int:
    """The integer ``query_pre_attn_scalar`` of a recipe's score scale (the way back of ``attention_scale``)."""
    scale = recipe.attention.scale
    return recipe.attention.head_dim_for(recipe.d_model) if scale is None else round(scale**-2)


def integer_scalar(recipe: Any) -> str | None:
    """A requirement: the score scale is ``q ** -0.5`` for an integer ``q`` (the config holds the integer)."""
    scale = recipe.attention.scale
    if scale is not None and float(query_pre_attn_scalar(recipe)) ** -0.5 != scale:
        return f"attention.scale is {scale}, needs query_pre_attn_scalar ** -0.5 for an integer query_pre_attn_scalar"
    return None


SCALE = Computed(
    "scale",
    keys={"query_pre_attn_scalar": 256},
    paths=("attention.scale",),
    read=lambda config, recipe: {} if attention_scale(config) is None else {"attention.scale": attention_scale(config)},
    write=lambda recipe, weights: {"query_pre_attn_scalar": query_pre_attn_scalar(recipe)},
    requires={"attention.scale": integer_scalar},
)
