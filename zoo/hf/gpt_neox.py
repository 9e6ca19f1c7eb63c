"""GPT-NeoX and Pythia (``GPTNeoXForCausalLM``): LayerNorm pre-norm decoders whose attention and MLP read the
block's input in parallel, each through its own norm (``use_parallel_residual``; false: the sequential
block), RoPE over the first ``rotary_pct`` of each head (rotate-half pairs), biased MHA and MLP, an untied head.

The fused ``query_key_value`` projection holds, head after head, that head's query, key and value
(``[H, 3, D]`` rows), split into zoo's q, k and v. Transformers 5 saves the head as ``embed_out`` (its
checkpoints' name), as does zoo.
"""

from __future__ import annotations

from typing import Any

from ._common import BIAS_FIELDS, attention_biases, defaults_except, grouped_qkv
from .gpt2 import QKV_BIASES, QKV_WEIGHTS
from .mapping import (
    ACTIVATIONS,
    HF_ACTIVATIONS,
    Family,
    Rule,
    activation_option,
    default_head_dim,
    dtype_name,
    no_layer_overrides,
)
from .rope import ROPE_OPTIONS, SCALING_FIELDS, hf_partial_rope, partial_rope, same_rotary_dims, scaling_fits

LAYER, BLOCK = "gpt_neox.layers.{i}", "blocks.{i}"

RULES = (
    Rule("gpt_neox.embed_in.weight", "embedding.token.weight"),
    *(
        Rule(f"{LAYER}.{hf}.{kind}", f"{BLOCK}.{zoo}.{kind}")
        for hf, zoo in (
            ("input_layernorm", "attention_norm"),
            ("post_attention_layernorm", "ffn_norm"),
            ("attention.dense", "attention.o_proj"),
            ("mlp.dense_h_to_4h", "ffn.up_proj"),
            ("mlp.dense_4h_to_h", "ffn.down_proj"),
        )
        for kind in ("weight", "bias")
    ),
    Rule(f"{LAYER}.attention.query_key_value.weight", QKV_WEIGHTS, grouped_qkv),
    Rule(f"{LAYER}.attention.query_key_value.bias", QKV_BIASES, grouped_qkv),
    Rule("gpt_neox.final_layer_norm.weight", "final_norm.weight"),
    Rule("gpt_neox.final_layer_norm.bias", "final_norm.bias"),
    Rule("embed_out.weight", "head.proj.weight"),  # only when untied
)

IGNORED = (
    f"{LAYER}.attention.bias",  # causal-mask buffers of older checkpoints
    f"{LAYER}.attention.masked_bias",
    f"{LAYER}.attention.rotary_emb.inv_freq",
    "embed_out.weight",  # the tied copy some checkpoints store
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 50432,
    "hidden_size": 6144,
    "num_hidden_layers": 44,
    "num_attention_heads": 64,
    "intermediate_size": 24576,
    "hidden_act": "gelu",
    "attention_dropout": 0.0,
    "hidden_dropout": 0.0,
    "max_position_embeddings": 2048,
    "layer_norm_eps": 1e-5,
    "pad_token_id": None,
    "tie_word_embeddings": False,
    "use_parallel_residual": True,
    "attention_bias": True,
    "rope_parameters": None,
    "rope_scaling": None,  # transformers 4
    "rotary_pct": 0.25,  # transformers 4: rope_parameters.partial_rotary_factor
    "rotary_emb_base": 10000.0,  # transformers 4: rope_parameters.rope_theta
}

OPTIONS = (*ROPE_OPTIONS, activation_option("hidden_act", "GPT-NeoX"))


REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "block.shared_norm": False,
    "block.*": defaults_except("block", "norm_position", "parallel"),
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.*": defaults_except("embedding"),
    "positional.type": "rope",
    "positional.*": defaults_except("positional", "theta", "rotary_fraction", *SCALING_FIELDS),
    "positional.rotary_fraction": same_rotary_dims,
    "positional.scaling": scaling_fits,
    "attention.type": "mha",
    "attention.head_dim": default_head_dim,
    "attention.*": defaults_except("attention", "num_heads", "head_dim", "dropout", *BIAS_FIELDS),
    "attention.biases": attention_biases(o_like_qkv=True),
    "norm.type": "layernorm",
    "norm.*": defaults_except("norm", "eps"),
    "ffn.type": "mlp",
    "ffn.activation": tuple(HF_ACTIVATIONS),
    "ffn.*": defaults_except("ffn", "hidden", "activation"),
    "head.type": "lm",
    "head.*": defaults_except("head", "tie_embeddings"),
}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    d_model, heads = config["hidden_size"], config["num_attention_heads"]
    return {
        "hf_family": "gpt_neox",
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": d_model,
        "num_layers": config["num_hidden_layers"],
        "max_len": config["max_position_embeddings"],
        "block": {"norm_position": "pre", "parallel": bool(config["use_parallel_residual"])},
        "embedding": {"type": "token"},
        "attention": {
            "type": "mha",
            "num_heads": heads,
            "bias": bool(config["attention_bias"]),
            "dropout": config["attention_dropout"],
        },
        "positional": partial_rope(config, d_model // heads, theta="rotary_emb_base", fraction="rotary_pct"),
        "norm": {"type": "layernorm", "eps": config["layer_norm_eps"]},
        "ffn": {
            "type": "mlp",
            "hidden": config["intermediate_size"],
            "activation": ACTIVATIONS[config["hidden_act"]],
        },
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
        "dropout": config["hidden_dropout"],
    }


def config(recipe, weights) -> dict[str, Any]:
    return {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": recipe.attention.num_heads,
        "intermediate_size": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "hidden_act": HF_ACTIVATIONS[recipe.ffn.activation],
        "attention_dropout": recipe.attention.dropout,
        "hidden_dropout": recipe.dropout,
        "max_position_embeddings": recipe.max_len,
        "layer_norm_eps": recipe.norm.eps,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "use_parallel_residual": recipe.block.parallel,
        "attention_bias": recipe.attention.biases()["q"],
        "rope_parameters": hf_partial_rope(recipe.positional),
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


GPT_NEOX = Family(
    name="gpt_neox",
    model_type="gpt_neox",
    classes=("GPTNeoXForCausalLM",),
    base_prefix="gpt_neox.",
    head_prefixes=("embed_out.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("pythia-160m",),
    unread={
        "classifier_dropout": "the dropout of GPTNeoXForTokenClassification's head, a class zoo does not import",
        "is_decoder": "a generic flag GPTNeoXForCausalLM does not read: its attention is always causal",
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "GPTNeoXForCausalLM",
)
