"""Phi-3 and Phi-4-mini (``Phi3ForCausalLM``): Llama's network (RMSNorm pre-norm decoder, RoPE, grouped-query
attention, SwiGLU, no biases) with the query, key and value projections fused into one ``qkv_proj`` (all queries,
then all keys, then all values) and the gate and up projections into one ``gate_up_proj`` (gate, then up), split
on import and fused on export; RoPE over the first ``partial_rotary_factor`` of each head (Phi-4-mini: 0.75);
and an optional sliding window (Phi-3-mini-4k: 2047 keys, itself included: zoo's attention ``window``).

The 128k-context models' LongRoPE (``longrope``, formerly ``su`` and ``yarn``) is zoo's ``longrope`` scaling: a
short and a long factor for each rotated pair, the long ones for sequences longer than the config's top-level
``original_max_position_embeddings`` (which transformers prefers to the rope parameters' own). Once a sequence
grows past that length, Phi-3's ``generate`` recomputes its cache under the long factors, and so does zoo's
(the rope's ``stale_after``).
"""

from __future__ import annotations

from typing import Any

from ._common import SPLIT_GATE_UP, defaults_except, stacked_qkv
from ._llama_legacy import _config, _recipe
from .gpt2 import QKV_WEIGHTS
from .llama import ACTS, GATED
from .mapping import Family, Option, Rule, no_layer_overrides
from .rope import (
    PHI3_ROPE_TYPES,
    SCALING_FIELDS,
    hf_partial_rope,
    partial_rope,
    rope_parameters,
    rope_type,
    same_rotary_dims,
)

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"

RULES = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    Rule(f"{LAYER}.input_layernorm.weight", f"{BLOCK}.attention_norm.weight"),
    Rule(f"{LAYER}.self_attn.qkv_proj.weight", QKV_WEIGHTS, stacked_qkv),
    Rule(f"{LAYER}.self_attn.o_proj.weight", f"{BLOCK}.attention.o_proj.weight"),
    Rule(f"{LAYER}.post_attention_layernorm.weight", f"{BLOCK}.ffn_norm.weight"),
    Rule(
        f"{LAYER}.mlp.gate_up_proj.weight",
        (f"{BLOCK}.ffn.gate_proj.weight", f"{BLOCK}.ffn.up_proj.weight"),
        SPLIT_GATE_UP,
    ),
    Rule(f"{LAYER}.mlp.down_proj.weight", f"{BLOCK}.ffn.down_proj.weight"),
    Rule("model.norm.weight", "final_norm.weight"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

IGNORED = (
    "model.layers.{i}.self_attn.rotary_emb.inv_freq",  # a buffer of older checkpoints
    "lm_head.weight",  # the tied copy some checkpoints store
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 32064,
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": None,
    "head_dim": None,  # not a Phi3Config attribute, but Phi3Attention reads one a config.json gives
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "attention_dropout": 0.0,
    "hidden_act": "silu",
    "max_position_embeddings": 4096,
    "original_max_position_embeddings": 4096,  # longrope's switch to its long factors
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "rope_parameters": None,
    "rope_scaling": None,  # transformers 4
    "rope_theta": 10000.0,  # transformers 4: rope_parameters.rope_theta
    "partial_rotary_factor": 1.0,  # transformers 4: rope_parameters.partial_rotary_factor
    "pad_token_id": 32000,
    "sliding_window": None,
}

ROPE_TYPES = ("default", "longrope", *PHI3_ROPE_TYPES)
ROPE_TYPE_WHY = "Phi3Config takes an unscaled rope or LongRoPE ('longrope', formerly 'su' and 'yarn') only"

OPTIONS = (
    Option("rope_scaling", lambda v: v is None or rope_type(v) in ROPE_TYPES, ROPE_TYPE_WHY),
    Option("rope_parameters.rope_type", lambda v: v is None or v in ROPE_TYPES, ROPE_TYPE_WHY),
    Option(
        "hidden_act",
        lambda v: v in GATED,
        f"zoo's gated FFNs apply {', '.join(GATED)} exactly (swiglu, geglu, reglu, geglu with approximate: tanh)",
    ),
)


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    params = rope_parameters(config)  # as Phi3Config holds them: LongRoPE's legacy names renamed
    params["rope_type"] = rope_type(params, PHI3_ROPE_TYPES)
    config = {**config, "rope_scaling": None, "rope_parameters": params}
    ffn = {**GATED[config["hidden_act"]], "hidden": config["intermediate_size"], "bias": False}
    out = _recipe(config, ffn, False)
    head_dim = config["head_dim"] or config["hidden_size"] // config["num_attention_heads"]
    out["positional"] = partial_rope(config, head_dim)
    if config["sliding_window"] is not None:
        out["attention"]["window"] = config["sliding_window"]
    out["dropout"] = config["resid_pdrop"]
    return {"hf_family": "phi3", **out}  # a Llama / Mistral network: exported back as Phi-3


REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "block.*": defaults_except("block", "norm_position"),
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.*": defaults_except("embedding", "padding_idx"),
    "positional.type": "rope",
    "positional.*": defaults_except("positional", "theta", "rotary_fraction", *SCALING_FIELDS),
    "positional.scaling": ("none", "longrope"),
    "positional.rotary_fraction": same_rotary_dims,
    "attention.type": ("mha", "gqa", "mqa"),
    "attention.bias": False,
    "attention.*": defaults_except("attention", "num_heads", "num_kv_heads", "head_dim", "dropout", "window", "bias"),
    "norm.type": "rmsnorm",
    "norm.*": defaults_except("norm", "eps"),
    "ffn.type": tuple(ACTS),
    "ffn.bias": False,
    "ffn.*": defaults_except("ffn", "hidden", "multiple_of", "approximate"),
    "head.type": "lm",
    "head.*": defaults_except("head", "tie_embeddings"),
}


def _original_length(rope: Any, max_len: int) -> int:
    """The top-level ``original_max_position_embeddings``: longrope's, which transformers takes over the rope
    parameters' own; else the model's length (Phi-3-mini-4k's 4096)."""
    return rope.original_max_len if rope.scaling == "longrope" else max_len


def config(recipe, weights) -> dict[str, Any]:
    return {
        **_config(recipe, weights, recipe.ffn, "blocks.0.ffn.up_proj.weight"),
        "rope_parameters": hf_partial_rope(recipe.positional),
        "original_max_position_embeddings": _original_length(recipe.positional, recipe.max_len),
        "sliding_window": recipe.attention.window,
        "resid_pdrop": recipe.dropout,
        "embd_pdrop": recipe.dropout,
    }


PHI3 = Family(
    name="phi3",
    model_type="phi3",
    classes=("Phi3ForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("phi-3-mini-4k",),
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "Phi3ForCausalLM",
)
