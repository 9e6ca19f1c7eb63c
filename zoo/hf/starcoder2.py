"""StarCoder2 (``Starcoder2ForCausalLM``): a pre-norm decoder with LayerNorm (with bias), grouped-query attention
with biases on all four projections (``use_bias``) over a sliding window, RoPE (half rotation), and a two-layer
MLP ``c_proj(gelu_tanh(c_fc(x)))`` with biases; the LM head is tied by default.

Dropout: ``residual_dropout`` (on the attention and MLP outputs) and ``embedding_dropout`` are zoo's one
``dropout`` of the recipe (the sub-layer outputs and the embedded input), so they must be equal;
``attention_dropout`` is the attention's.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from ._llama_legacy import LLAMA_OPTIONS, _attention, token_embedding
from .llama import ATTENTION, IGNORED
from .mapping import (
    ACTIVATIONS,
    HF_ACTIVATIONS,
    Family,
    Rule,
    activation_option,
    dtype_name,
    no_layer_overrides,
)
from .rope import hf_rope_parameters, rope_spec, scaling_fits

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"

RULES = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    *(Rule(f"{LAYER}.input_layernorm.{kind}", f"{BLOCK}.attention_norm.{kind}") for kind in ("weight", "bias")),
    *ATTENTION,
    *(Rule(f"{LAYER}.post_attention_layernorm.{kind}", f"{BLOCK}.ffn_norm.{kind}") for kind in ("weight", "bias")),
    *(Rule(f"{LAYER}.mlp.c_fc.{kind}", f"{BLOCK}.ffn.up_proj.{kind}") for kind in ("weight", "bias")),
    *(Rule(f"{LAYER}.mlp.c_proj.{kind}", f"{BLOCK}.ffn.down_proj.{kind}") for kind in ("weight", "bias")),
    *(Rule(f"model.norm.{kind}", f"final_norm.{kind}") for kind in ("weight", "bias")),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 49152,
    "hidden_size": 3072,
    "intermediate_size": 12288,
    "num_hidden_layers": 30,
    "num_attention_heads": 24,
    "num_key_value_heads": 2,
    "head_dim": None,
    "hidden_act": "gelu_pytorch_tanh",
    "max_position_embeddings": 4096,
    "norm_epsilon": 1e-5,
    "rope_theta": 10000.0,
    "rope_parameters": None,
    "rope_scaling": None,
    "sliding_window": None,
    "attention_dropout": 0.0,
    "residual_dropout": 0.0,
    "embedding_dropout": 0.0,
    "use_bias": True,
    "tie_word_embeddings": True,
    "pad_token_id": None,
}
"""Starcoder2Config's defaults (it has no head_dim attribute, but Starcoder2Attention reads one a config gives)."""

OPTIONS = (
    *(option for option in LLAMA_OPTIONS if option.key != "hidden_act"),
    activation_option("hidden_act", "StarCoder2"),
)

HF_ACTS = {**HF_ACTIVATIONS, "gelu_tanh": "gelu_pytorch_tanh"}
"""zoo activation -> StarCoder2's ``hidden_act`` on export (torch's tanh GELU, as the published models use)."""


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    residual, embedding = config["residual_dropout"], config["embedding_dropout"]
    if residual != embedding:
        raise HFImportError(
            f"residual_dropout={residual!r} and embedding_dropout={embedding!r} differ: zoo has one dropout for the "
            "sub-layer outputs and the embedded input (these only matter when training)"
        )
    attention = _attention(config, bool(config["use_bias"]))
    if config["sliding_window"] is not None:
        attention["window"] = config["sliding_window"]
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": config["hidden_size"],
        "num_layers": config["num_hidden_layers"],
        "max_len": config["max_position_embeddings"],
        "norm_position": "pre",
        "dropout": residual,
        "embedding": token_embedding(config),
        "attention": attention,
        "positional": rope_spec(config),
        "norm": {"type": "layernorm", "eps": config["norm_epsilon"]},
        "ffn": {
            "type": "mlp",
            "hidden": config["intermediate_size"],
            "activation": ACTIVATIONS[config["hidden_act"]],
            "bias": bool(config["use_bias"]),
        },
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
    }


def config(recipe, weights) -> dict[str, Any]:
    return {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "intermediate_size": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": recipe.attention.num_heads,
        "num_key_value_heads": recipe.attention.num_kv_heads,
        "head_dim": recipe.attention.head_dim_for(recipe.d_model),
        "hidden_act": HF_ACTS[recipe.ffn.activation],
        "max_position_embeddings": recipe.max_len,
        "norm_epsilon": recipe.norm.eps,
        "rope_parameters": hf_rope_parameters(recipe.positional),
        "rope_theta": recipe.positional.theta,
        "sliding_window": recipe.attention.window,
        "attention_dropout": recipe.attention.dropout,
        "residual_dropout": recipe.dropout,
        "embedding_dropout": recipe.dropout,
        "use_bias": recipe.attention.bias,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


def one_bias(recipe: Any) -> str | None:
    """A requirement: every projection of attention and MLP biased, or none (StarCoder2's one ``use_bias``)."""
    on = {**{f"attention.{p}": b for p, b in recipe.attention.biases().items()}, "ffn": recipe.ffn.bias}
    if len(set(on.values())) != 1 or recipe.attention.bias != recipe.ffn.bias:
        return f"biases are {on}, need all or none (use_bias)"
    return None


REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.scale": False,
    "positional.type": "rope",
    "positional.interleaved": False,
    "positional.rotary_fraction": 1.0,
    "positional.scaling": scaling_fits,
    "attention.type": ("mha", "gqa", "mqa"),
    "attention.scale": None,
    "attention.softcap": None,
    "attention.qk_norm": None,
    "attention.rotary": None,
    "norm.type": "layernorm",
    "norm.bias": True,
    "norm.affine": True,
    "ffn.type": "mlp",
    "ffn.activation": tuple(HF_ACTS),
    "ffn.dropout": 0.0,
    "biases": one_bias,
    "head.type": "lm",
    "head.bias": False,
    "head.rescale": False,
}

STARCODER2 = Family(
    name="starcoder2",
    model_type="starcoder2",
    classes=("Starcoder2ForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("starcoder2-3b",),
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "Starcoder2ForCausalLM",
)
