"""GPT-2 (``GPT2LMHeadModel``): learned positions, pre-norm LayerNorm, GELU-tanh MLP, tied LM head.

GPT-2 stores its linear layers as ``Conv1D`` with (in, out) weights, transposed to zoo's ``nn.Linear``
(out, in); its attention has one fused ``c_attn`` projection, split into q, k and v.
"""

from __future__ import annotations

from typing import Any

from .mapping import (
    ACTIVATIONS,
    CLASSIC_BLOCK,
    CONV1D_QKV,
    HF_ACTIVATIONS,
    SPLIT_QKV,
    TRANSPOSE,
    Family,
    Option,
    Rule,
    activation_option,
    dtype_name,
    no_layer_overrides,
)

QKV_WEIGHTS = tuple(f"blocks.{{i}}.attention.{p}_proj.weight" for p in "qkv")
QKV_BIASES = tuple(f"blocks.{{i}}.attention.{p}_proj.bias" for p in "qkv")

RULES = (
    Rule("transformer.wte.weight", "embedding.token.weight"),
    Rule("transformer.wpe.weight", "positional.embedding.weight"),
    Rule("transformer.h.{i}.ln_1.weight", "blocks.{i}.attention_norm.weight"),
    Rule("transformer.h.{i}.ln_1.bias", "blocks.{i}.attention_norm.bias"),
    Rule("transformer.h.{i}.attn.c_attn.weight", QKV_WEIGHTS, CONV1D_QKV),
    Rule("transformer.h.{i}.attn.c_attn.bias", QKV_BIASES, SPLIT_QKV),
    Rule("transformer.h.{i}.attn.c_proj.weight", "blocks.{i}.attention.o_proj.weight", TRANSPOSE),
    Rule("transformer.h.{i}.attn.c_proj.bias", "blocks.{i}.attention.o_proj.bias"),
    Rule("transformer.h.{i}.ln_2.weight", "blocks.{i}.ffn_norm.weight"),
    Rule("transformer.h.{i}.ln_2.bias", "blocks.{i}.ffn_norm.bias"),
    Rule("transformer.h.{i}.mlp.c_fc.weight", "blocks.{i}.ffn.up_proj.weight", TRANSPOSE),
    Rule("transformer.h.{i}.mlp.c_fc.bias", "blocks.{i}.ffn.up_proj.bias"),
    Rule("transformer.h.{i}.mlp.c_proj.weight", "blocks.{i}.ffn.down_proj.weight", TRANSPOSE),
    Rule("transformer.h.{i}.mlp.c_proj.bias", "blocks.{i}.ffn.down_proj.bias"),
    Rule("transformer.ln_f.weight", "final_norm.weight"),
    Rule("transformer.ln_f.bias", "final_norm.bias"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied: a tied head is the token table
)

IGNORED = (
    "transformer.h.{i}.attn.bias",  # causal-mask buffers of older checkpoints
    "transformer.h.{i}.attn.masked_bias",
    "lm_head.weight",  # the tied copy of wte that some checkpoints store
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 50257,
    "n_positions": 1024,
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "n_inner": None,
    "activation_function": "gelu_new",
    "resid_pdrop": 0.1,
    "embd_pdrop": 0.1,
    "attn_pdrop": 0.1,
    "layer_norm_epsilon": 1e-5,
    "scale_attn_weights": True,
    "scale_attn_by_inverse_layer_idx": False,
    "add_cross_attention": False,
    "tie_word_embeddings": True,
    "pad_token_id": None,
}

OPTIONS = (
    Option("add_cross_attention", lambda v: not v, "zoo's decoder has no cross-attention"),
    Option("scale_attn_weights", lambda v: v is not False, "zoo always scales scores by 1/sqrt(head_dim)"),
    Option(
        "scale_attn_by_inverse_layer_idx",
        lambda v: not v,
        "zoo has no per-layer score scale of 1/(layer_idx + 1)",
    ),
    activation_option("activation_function", "GPT-2"),
)

REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.scale": False,
    **CLASSIC_BLOCK,
    "head.type": "lm",
    "head.bias": False,
    "head.rescale": False,
    "head.softcap": None,
}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    d_model = config["n_embd"]
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": d_model,
        "num_layers": config["n_layer"],
        "max_len": config["n_positions"],
        "norm_position": "pre",
        "embedding": {"type": "token"},
        "attention": {"type": "mha", "num_heads": config["n_head"], "dropout": config["attn_pdrop"]},
        "positional": {"type": "learned"},
        "norm": {"type": "layernorm", "eps": config["layer_norm_epsilon"]},
        "ffn": {
            "type": "mlp",
            "hidden": config["n_inner"] or 4 * d_model,
            "activation": ACTIVATIONS[config["activation_function"]],
        },
        "head": {"type": "lm", "tie_embeddings": config["tie_word_embeddings"]},
        "dropout": config["resid_pdrop"],
    }


def config(recipe, weights) -> dict[str, Any]:
    return {
        "vocab_size": recipe.vocab_size,
        "n_positions": recipe.max_len,
        "n_embd": recipe.d_model,
        "n_layer": recipe.num_layers,
        "n_head": recipe.attention.num_heads,
        "n_inner": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "activation_function": HF_ACTIVATIONS[recipe.ffn.activation],
        "layer_norm_epsilon": recipe.norm.eps,
        "resid_pdrop": recipe.dropout,
        "embd_pdrop": recipe.dropout,
        "attn_pdrop": recipe.attention.dropout,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


GPT2 = Family(
    name="gpt2",
    model_type="gpt2",
    classes=("GPT2LMHeadModel", "GPT2Model"),
    base_prefix="transformer.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("gpt2-small",),
    unread={
        "reorder_and_upcast_attn": "the order of the score scaling and an fp32 upcast: the same function",
        **{
            key: "GPT2DoubleHeadsModel's multiple-choice head, a class zoo does not import"
            for key in (
                "summary_activation",
                "summary_first_dropout",
                "summary_proj_to_labels",
                "summary_type",
                "summary_use_proj",
            )
        },
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "GPT2LMHeadModel",
)
