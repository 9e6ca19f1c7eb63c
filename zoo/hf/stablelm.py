"""StableLM 2 and StableLM 3B 4E1T (``StableLmForCausalLM``): Llama's decoder with LayerNorm (with biases) instead of
RMSNorm, RoPE over the first ``partial_rotary_factor`` of each head (rotate-half pairs), optional biases on the
query, key and value projections (``use_qkv_bias``) and, with ``use_parallel_residual``, attention and SwiGLU in
parallel from one shared norm. Per-head query/key norms (``qk_layernorm``, StableLM 2 12B) are refused.
"""

from __future__ import annotations

from typing import Any

from ._common import BIAS_FIELDS, attention_biases, defaults_except
from ._llama_legacy import token_embedding
from .llama import ACTS, GATED, hidden_act
from .mapping import Family, Option, Rule, default_head_dim, dtype_name, no_layer_overrides
from .rope import ROPE_OPTIONS, SCALING_FIELDS, hf_partial_rope, partial_rope, same_rotary_dims, scaling_fits

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"

RULES = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    *(
        Rule(f"{LAYER}.{hf}.{kind}", f"{BLOCK}.{zoo}.{kind}")
        for hf, zoo in (
            ("input_layernorm", "attention_norm"),
            ("post_attention_layernorm", "ffn_norm"),  # only in the sequential block
            *((f"self_attn.{p}_proj", f"attention.{p}_proj") for p in "qkv"),
        )
        for kind in ("weight", "bias")
    ),
    Rule(f"{LAYER}.self_attn.o_proj.weight", f"{BLOCK}.attention.o_proj.weight"),
    *(Rule(f"{LAYER}.mlp.{p}_proj.weight", f"{BLOCK}.ffn.{p}_proj.weight") for p in ("gate", "up", "down")),
    Rule("model.norm.weight", "final_norm.weight"),
    Rule("model.norm.bias", "final_norm.bias"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

IGNORED = (
    "model.layers.{i}.self_attn.rotary_emb.inv_freq",  # a buffer of older checkpoints
    "lm_head.weight",  # the tied copy some checkpoints store
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 50304,
    "intermediate_size": 6912,
    "hidden_size": 2560,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 4096,
    "layer_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "rope_parameters": None,
    "rope_scaling": None,  # transformers 4
    "rope_theta": 10000.0,  # transformers 4: rope_parameters.rope_theta
    "partial_rotary_factor": 0.25,  # transformers 4: rope_parameters.partial_rotary_factor
    "use_qkv_bias": False,
    "use_parallel_residual": False,
    "hidden_dropout": 0.0,
    "attention_dropout": 0.0,
    "pad_token_id": None,
}

OPTIONS = (
    *ROPE_OPTIONS,
    Option(
        "hidden_act",
        lambda v: v in GATED,
        f"zoo's gated FFNs apply {', '.join(GATED)} exactly (swiglu, geglu, reglu, geglu with approximate: tanh)",
    ),
    Option(
        "qk_layernorm",
        lambda v: not v,
        "StableLM normalises the queries and keys of each head with that head's own LayerNorm (no bias); "
        "zoo's qk_norm is one norm shared by all heads",
    ),
)


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    d_model, heads = config["hidden_size"], config["num_attention_heads"]
    kv_heads = config["num_key_value_heads"] or heads
    attention: dict[str, Any] = {"type": "mha", "num_heads": heads}
    if kv_heads != heads:
        attention.update(type="gqa", num_kv_heads=kv_heads)
    parallel = bool(config["use_parallel_residual"])
    return {
        "hf_family": "stablelm",
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": d_model,
        "num_layers": config["num_hidden_layers"],
        "max_len": config["max_position_embeddings"],
        "block": {"norm_position": "pre", "parallel": parallel, "shared_norm": parallel},
        "embedding": token_embedding(config),
        "attention": {
            **attention,
            "bias": bool(config["use_qkv_bias"]),
            "o_bias": False,
            "dropout": config["attention_dropout"],
        },
        "positional": partial_rope(config, d_model // heads),
        "norm": {"type": "layernorm", "eps": config["layer_norm_eps"]},
        "ffn": {**GATED[config["hidden_act"]], "hidden": config["intermediate_size"], "bias": False},
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
        "dropout": config["hidden_dropout"],
    }


def _one_norm_in_parallel(recipe: Any) -> str | None:
    """A requirement: a parallel block shares one norm (StableLM's parallel block has no post_attention_layernorm)."""
    if recipe.block.parallel and not recipe.block.shared_norm:
        return "block.shared_norm is False, needs True in a parallel block (StableLM's has one norm)"
    return None


REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "block.shared_norm": _one_norm_in_parallel,
    "block.*": defaults_except("block", "norm_position", "parallel", "shared_norm"),
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.*": defaults_except("embedding", "padding_idx"),
    "positional.type": "rope",
    "positional.*": defaults_except("positional", "theta", "rotary_fraction", *SCALING_FIELDS),
    "positional.rotary_fraction": same_rotary_dims,
    "positional.scaling": scaling_fits,
    "attention.type": ("mha", "gqa", "mqa"),
    "attention.head_dim": default_head_dim,
    "attention.*": defaults_except("attention", "num_heads", "num_kv_heads", "head_dim", "dropout", *BIAS_FIELDS),
    "attention.biases": attention_biases(o=False),
    "norm.type": "layernorm",
    "norm.*": defaults_except("norm", "eps"),
    "ffn.type": tuple(ACTS),
    "ffn.bias": False,
    "ffn.*": defaults_except("ffn", "hidden", "multiple_of", "approximate"),
    "head.type": "lm",
    "head.*": defaults_except("head", "tie_embeddings"),
}


def config(recipe, weights) -> dict[str, Any]:
    return {
        "vocab_size": recipe.vocab_size,
        "intermediate_size": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "hidden_size": recipe.d_model,
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": recipe.attention.num_heads,
        "num_key_value_heads": recipe.attention.num_kv_heads,
        "hidden_act": hidden_act(recipe.ffn),
        "max_position_embeddings": recipe.max_len,
        "layer_norm_eps": recipe.norm.eps,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "rope_parameters": hf_partial_rope(recipe.positional),
        "use_qkv_bias": recipe.attention.biases()["q"],
        "qk_layernorm": False,
        "use_parallel_residual": recipe.block.parallel,
        "hidden_dropout": recipe.dropout,
        "attention_dropout": recipe.attention.dropout,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


STABLELM = Family(
    name="stablelm",
    model_type="stablelm",
    classes=("StableLmForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("stablelm-2-1.6b",),
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "StableLmForCausalLM",
)
