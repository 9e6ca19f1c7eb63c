"""GPT-J (``GPTJForCausalLM``): a LayerNorm pre-norm decoder whose attention and MLP read one shared norm of
the block's input in parallel, RoPE over the first ``rotary_dim`` dims of each head in adjacent pairs
(zoo's ``interleaved``, base 10000), unbiased q/k/v/out projections, a biased GELU-tanh MLP and a biased,
untied LM head.
"""

from __future__ import annotations

from typing import Any

from zoo.components.positional import rotary_dims
from zoo.errors import HFImportError

from ._common import BIAS_FIELDS, attention_biases, defaults_except
from .mapping import (
    ACTIVATIONS,
    HF_ACTIVATIONS,
    Family,
    Option,
    Rule,
    activation_option,
    default_head_dim,
    dtype_name,
    no_layer_overrides,
)
from .rope import rotary_fraction

LAYER, BLOCK = "transformer.h.{i}", "blocks.{i}"

RULES = (
    Rule("transformer.wte.weight", "embedding.token.weight"),
    *(Rule(f"{LAYER}.attn.{p}_proj.weight", f"{BLOCK}.attention.{p}_proj.weight") for p in "qkv"),
    Rule(f"{LAYER}.attn.out_proj.weight", f"{BLOCK}.attention.o_proj.weight"),
    *(
        Rule(f"{LAYER}.{hf}.{kind}", f"{BLOCK}.{zoo}.{kind}")
        for hf, zoo in (("ln_1", "attention_norm"), ("mlp.fc_in", "ffn.up_proj"), ("mlp.fc_out", "ffn.down_proj"))
        for kind in ("weight", "bias")
    ),
    Rule("transformer.ln_f.weight", "final_norm.weight"),
    Rule("transformer.ln_f.bias", "final_norm.bias"),
    Rule("lm_head.weight", "head.proj.weight"),
    Rule("lm_head.bias", "head.proj.bias"),
)

IGNORED = (
    f"{LAYER}.attn.bias",  # causal-mask buffers of older checkpoints
    f"{LAYER}.attn.masked_bias",
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 50400,
    "n_positions": 2048,
    "n_embd": 4096,
    "n_layer": 28,
    "n_head": 16,
    "rotary_dim": 64,
    "n_inner": None,
    "activation_function": "gelu_new",
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "attn_pdrop": 0.0,
    "layer_norm_epsilon": 1e-5,
    "tie_word_embeddings": False,
    "pad_token_id": None,
}

THETA = 10000.0
"""GPT-J's rotary base: fixed in its code (``create_sinusoidal_positions``), no config key."""

OPTIONS = (
    activation_option("activation_function", "GPT-J"),
    Option(
        "tie_word_embeddings",
        lambda v: not v,
        "GPT-J's LM head has a bias, and zoo's tied head has none (tie_embeddings excludes bias)",
    ),
)

REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "block.parallel": True,
    "block.shared_norm": True,
    "block.*": defaults_except("block", "norm_position", "parallel", "shared_norm"),
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.*": defaults_except("embedding"),
    "positional.type": "rope",
    "positional.theta": THETA,
    "positional.interleaved": True,
    "positional.*": defaults_except("positional", "theta", "interleaved", "rotary_fraction"),
    "attention.type": "mha",
    "attention.head_dim": default_head_dim,
    "attention.*": defaults_except("attention", "num_heads", "head_dim", "dropout", *BIAS_FIELDS),
    "attention.biases": attention_biases(qkv=False, o=False),
    "norm.type": "layernorm",
    "norm.*": defaults_except("norm", "eps"),
    "ffn.type": "mlp",
    "ffn.activation": tuple(HF_ACTIVATIONS),
    "ffn.*": defaults_except("ffn", "hidden", "activation"),
    "head.type": "lm",
    "head.tie_embeddings": False,
    "head.bias": True,
    "head.*": defaults_except("head", "tie_embeddings", "bias"),
}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    d_model, heads = config["n_embd"], config["n_head"]
    head_dim = d_model // heads
    rotated = config["rotary_dim"]
    if rotated is None:
        if heads != 1:
            raise HFImportError(
                f"rotary_dim=None with n_head={heads} is not supported: GPT-J then builds its cos/sin table "
                f"n_embd ({d_model}) wide, which fits no head of {head_dim} dims (transformers fails too)"
            )
        rotated = head_dim
    return {
        "hf_family": "gptj",
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": d_model,
        "num_layers": config["n_layer"],
        "max_len": config["n_positions"],
        "block": {"norm_position": "pre", "parallel": True, "shared_norm": True},
        "embedding": {"type": "token"},
        "attention": {"type": "mha", "num_heads": heads, "bias": False, "dropout": config["attn_pdrop"]},
        "positional": {
            "type": "rope",
            "theta": THETA,
            "interleaved": True,
            "rotary_fraction": rotary_fraction(rotated, head_dim),
        },
        "norm": {"type": "layernorm", "eps": config["layer_norm_epsilon"]},
        "ffn": {
            "type": "mlp",
            "hidden": config["n_inner"] or 4 * d_model,
            "activation": ACTIVATIONS[config["activation_function"]],
        },
        "head": {"type": "lm", "tie_embeddings": False, "bias": True},
        "dropout": config["resid_pdrop"],
    }


def config(recipe, weights) -> dict[str, Any]:
    head_dim = recipe.attention.head_dim_for(recipe.d_model)
    return {
        "vocab_size": recipe.vocab_size,
        "n_positions": recipe.max_len,
        "n_embd": recipe.d_model,
        "n_layer": recipe.num_layers,
        "n_head": recipe.attention.num_heads,
        "rotary_dim": rotary_dims(head_dim, recipe.positional.rotary_fraction),
        "n_inner": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "activation_function": HF_ACTIVATIONS[recipe.ffn.activation],
        "resid_pdrop": recipe.dropout,
        "embd_pdrop": recipe.dropout,
        "attn_pdrop": recipe.attention.dropout,
        "layer_norm_epsilon": recipe.norm.eps,
        "tie_word_embeddings": False,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


GPTJ = Family(
    name="gptj",
    model_type="gptj",
    classes=("GPTJForCausalLM",),
    base_prefix="transformer.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("gpt-j-6b",),
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "GPTJForCausalLM",
)
