"""The hand-written Llama translation that families not yet written as tables still build on (their recipe and
config functions start from ``_recipe`` and ``_config``). Each goes when the last family using it is a table.
"""

from __future__ import annotations

from typing import Any

from .mapping import Option, dtype_name, no_layer_overrides
from .rope import ROPE_OPTIONS, hf_rope_parameters, rope_spec, scaling_fits
from .rows import GATED, hidden_act

LLAMA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": None,
    "head_dim": None,
    "hidden_act": "silu",
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
    "rope_parameters": None,
    "rope_scaling": None,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "mlp_bias": False,
    "pad_token_id": None,
}

LLAMA_OPTIONS = (
    *ROPE_OPTIONS,
    Option(
        "rope_parameters.partial_rotary_factor",
        lambda v: v in (None, 1.0),
        "Llama-family attention rotates every head dim",
    ),
    Option(
        "hidden_act",
        lambda v: v in GATED,
        f"zoo's gated FFNs apply {', '.join(GATED)} exactly (swiglu, geglu, reglu, geglu with approximate: tanh)",
    ),
)


def _attention(config: dict[str, Any], bias: bool) -> dict[str, Any]:
    heads = config["num_attention_heads"]
    kv_heads = config["num_key_value_heads"] or heads
    spec: dict[str, Any] = {"type": "mha", "num_heads": heads}
    if kv_heads != heads:
        spec.update(type="gqa", num_kv_heads=kv_heads)
    if config["head_dim"] is not None:
        spec["head_dim"] = config["head_dim"]
    return {**spec, "bias": bias, "dropout": config["attention_dropout"]}


def token_embedding(config: dict[str, Any]) -> dict[str, Any]:
    """The token embedding spec: ``nn.Embedding(vocab_size, hidden_size, padding_idx=pad_token_id)`` as HF has it."""
    pad = config["pad_token_id"]
    embedding: dict[str, Any] = {"type": "token"}
    if pad is not None and 0 <= pad < config["vocab_size"]:
        embedding["padding_idx"] = pad
    return embedding


def _recipe(config: dict[str, Any], ffn: dict[str, Any], bias: bool) -> dict[str, Any]:
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": config["hidden_size"],
        "num_layers": config["num_hidden_layers"],
        "max_len": config["max_position_embeddings"],
        "norm_position": "pre",
        "embedding": token_embedding(config),
        "attention": _attention(config, bias),
        "positional": rope_spec(config),
        "norm": {"type": "rmsnorm", "eps": config["rms_norm_eps"]},
        "ffn": ffn,
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
    }


def _config(recipe, weights, ffn: Any, intermediate: str) -> dict[str, Any]:
    theta = recipe.positional.theta
    return {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "intermediate_size": weights[intermediate].shape[0],
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": recipe.attention.num_heads,
        "num_key_value_heads": recipe.attention.num_kv_heads,
        "head_dim": recipe.attention.head_dim_for(recipe.d_model),
        "hidden_act": hidden_act(ffn),
        "max_position_embeddings": recipe.max_len,
        "rms_norm_eps": recipe.norm.eps,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "rope_parameters": hf_rope_parameters(recipe.positional),
        "rope_theta": theta,
        "attention_dropout": recipe.attention.dropout,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


COMMON_REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.scale": False,
    "positional.type": "rope",
    "positional.scaling": scaling_fits,
    "positional.interleaved": False,
    "positional.rotary_fraction": 1.0,
    "attention.type": ("mha", "gqa", "mqa"),
    "attention.scale": None,
    "attention.q_bias": None,  # one attention_bias for all four projections
    "attention.k_bias": None,
    "attention.v_bias": None,
    "attention.o_bias": None,
    "attention.softcap": None,
    "attention.qk_norm": None,
    "attention.rotary": None,
    "norm.type": "rmsnorm",
    "norm.affine": True,
    "norm.offset": 0.0,  # Gemma's (1 + w) scale
    "head.type": "lm",
    "head.bias": False,
    "head.rescale": False,
    "head.softcap": None,
}
