"""Phi-3 and Phi-4-mini (``Phi3ForCausalLM``): Mistral's table with q/k/v fused into one ``qkv_proj`` (all queries,
keys, then values), gate and up into one ``gate_up_proj`` (gate, then up), and RoPE over the first
``partial_rotary_factor`` of each head (Phi-4-mini: 0.75). The 128k models' LongRoPE (``longrope``, formerly ``su``
and ``yarn``) is zoo's ``longrope`` scaling, switching to its long factors past ``original_max_position_embeddings``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ._common import SPLIT_GATE_UP, stacked_qkv
from .gpt2 import QKV_WEIGHTS
from .mapping import Option, Rule
from .mistral import MISTRAL
from .rope import PHI3_ROPE_TYPES, rope_parameters, rope_type
from .rows import rope
from .rows_neox import dropout
from .table import Fixed, Key

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"
GATE_UP = (f"{BLOCK}.ffn.gate_proj.weight", f"{BLOCK}.ffn.up_proj.weight")

RULES = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    Rule(f"{LAYER}.input_layernorm.weight", f"{BLOCK}.attention_norm.weight"),
    Rule(f"{LAYER}.self_attn.qkv_proj.weight", QKV_WEIGHTS, stacked_qkv),
    Rule(f"{LAYER}.self_attn.o_proj.weight", f"{BLOCK}.attention.o_proj.weight"),
    Rule(f"{LAYER}.post_attention_layernorm.weight", f"{BLOCK}.ffn_norm.weight"),
    Rule(f"{LAYER}.mlp.gate_up_proj.weight", GATE_UP, SPLIT_GATE_UP),
    Rule(f"{LAYER}.mlp.down_proj.weight", f"{BLOCK}.ffn.down_proj.weight"),
    Rule("model.norm.weight", "final_norm.weight"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

ROPE_TYPES = ("default", "longrope", *PHI3_ROPE_TYPES)
ROPE_TYPE_WHY = "Phi3Config takes an unscaled rope or LongRoPE ('longrope', formerly 'su' and 'yarn') only"

PARTIAL = rope(partial=True)


def _longrope(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """Quirk: the rope parameters as Phi3Config holds them, LongRoPE's legacy names renamed."""
    params = rope_parameters(config)
    params["rope_type"] = rope_type(params, PHI3_ROPE_TYPES)
    return PARTIAL.read({**config, "rope_scaling": None, "rope_parameters": params}, recipe)


def _hf_longrope(recipe: Any, weights: Any) -> dict[str, Any]:
    """Quirk: LongRoPE's switch to its long factors is the top-level ``original_max_position_embeddings``, which
    transformers takes over the rope parameters' own; without LongRoPE the model's length (Phi-3-mini-4k's 4096).
    Past that length Phi-3's ``generate`` recomputes its cache under the long factors, as zoo's does (the rope's
    ``stale_after``)."""
    rotary = recipe.positional
    original = rotary.original_max_len if rotary.scaling == "longrope" else recipe.max_len
    return {**PARTIAL.write(recipe, weights), "original_max_position_embeddings": original}


PHI3 = MISTRAL.derive(
    "phi3",
    classes=("Phi3ForCausalLM",),
    rules=RULES,
    recipes=("phi-3-mini-4k",),
    drop=("rope_parameters.partial_rotary_factor",),
    rows=(
        replace(
            PARTIAL,
            keys={**PARTIAL.keys, "original_max_position_embeddings": 4096},
            read=_longrope,
            write=_hf_longrope,
            requires={**PARTIAL.requires, "positional.scaling": ("none", "longrope")},
        ),
        Option("rope_scaling", lambda v: v is None or rope_type(v) in ROPE_TYPES, ROPE_TYPE_WHY),
        Option("rope_parameters.rope_type", lambda v: v is None or v in ROPE_TYPES, ROPE_TYPE_WHY),
        Key("sliding_window", "attention.window", None),
        Fixed("ffn.dropout", 0.0, imported=False),  # Phi3MLP has none: resid_pdrop is the recipe's dropout
        dropout("resid_pdrop", "embd_pdrop"),  # after each sub-layer, and (written, not read) after the embedding
    ),
    defaults={"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_key_value_heads": None}
    | {"max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "pad_token_id": 32000},
)
