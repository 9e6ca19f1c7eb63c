"""BLOOM (``BloomForCausalLM``): ALiBi instead of positions, a LayerNorm on the embeddings
(``word_embeddings_layernorm``: zoo's ``embed_norm: true``), pre-norm LayerNorm blocks of biased MHA and a
4x GELU-tanh MLP, a final LayerNorm and a tied head.

The fused ``query_key_value`` projection holds, head after head, that head's query, key and value
(``[H, 3, D]`` rows), split into zoo's q, k and v. BLOOM's ALiBi slopes are zoo's for every head count
(powers of two or not), and its bias ``slope * key position`` (positions counted over the attention mask, so
padding shifts none) differs from zoo's ``-slope * |query - key|`` by a constant per query row, which the
softmax removes. BLOOM's config has no length (ALiBi is not bounded by one): zoo's ``max_len``, the default
decoding length, is 2048, the length BLOOM was trained at.
"""

from __future__ import annotations

from typing import Any

from ._common import defaults_except, grouped_qkv
from .gpt2 import QKV_BIASES, QKV_WEIGHTS
from .mapping import Family, Option, Rule, default_head_dim, dtype_name, no_layer_overrides

LAYER, BLOCK = "transformer.h.{i}", "blocks.{i}"

TRAINED_LENGTH = 2048
"""The sequence length BLOOM was trained at: an imported recipe's ``max_len``."""

RULES = (
    Rule("transformer.word_embeddings.weight", "embedding.token.weight"),
    Rule("transformer.word_embeddings_layernorm.weight", "embed_norm.weight"),
    Rule("transformer.word_embeddings_layernorm.bias", "embed_norm.bias"),
    *(
        Rule(f"{LAYER}.{hf}.{kind}", f"{BLOCK}.{zoo}.{kind}")
        for hf, zoo in (
            ("input_layernorm", "attention_norm"),
            ("self_attention.dense", "attention.o_proj"),
            ("post_attention_layernorm", "ffn_norm"),
            ("mlp.dense_h_to_4h", "ffn.up_proj"),
            ("mlp.dense_4h_to_h", "ffn.down_proj"),
        )
        for kind in ("weight", "bias")
    ),
    Rule(f"{LAYER}.self_attention.query_key_value.weight", QKV_WEIGHTS, grouped_qkv),
    Rule(f"{LAYER}.self_attention.query_key_value.bias", QKV_BIASES, grouped_qkv),
    Rule("transformer.ln_f.weight", "final_norm.weight"),
    Rule("transformer.ln_f.bias", "final_norm.bias"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

IGNORED = ("lm_head.weight",)  # the tied copy of word_embeddings some checkpoints store

DEFAULTS: dict[str, Any] = {
    "vocab_size": 250880,
    "hidden_size": 64,
    "n_embed": None,  # the older name of hidden_size, which it overrides (bigscience/bloom)
    "n_layer": 2,
    "n_head": 8,
    "num_hidden_layers": None,  # aliases of n_layer and n_head (BloomConfig.attribute_map)
    "num_attention_heads": None,
    "layer_norm_epsilon": 1e-5,
    "hidden_dropout": 0.0,
    "attention_dropout": 0.0,
    "tie_word_embeddings": True,
    "pad_token_id": None,
}

OPTIONS = (
    Option(
        "apply_residual_connection_post_layernorm",
        lambda v: not v,
        "zoo's residual stream carries the block's input, not its normalised input",
    ),
)


def _first(config: dict[str, Any], *keys: str) -> Any:
    return next(config[k] for k in keys if config.get(k) is not None)


def embed_norm_on(recipe: Any) -> str | None:
    """A requirement: the embeddings are normalised (a pre-norm stack leaves them alone unless told)."""
    return None if recipe.embed_norm else "embed_norm is not true, needs true (word_embeddings_layernorm)"


def four_times_wider(recipe: Any) -> str | None:
    """A requirement: an MLP of 4 * d_model (BLOOM's config has no key for its width)."""
    hidden = recipe.ffn.hidden
    if hidden not in (None, 4 * recipe.d_model):
        return f"ffn.hidden is {hidden}, needs 4 * d_model ({4 * recipe.d_model}): BLOOM's MLP width is fixed"
    return None


REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "block.*": defaults_except("block", "norm_position"),
    "embed_norm": embed_norm_on,
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.*": defaults_except("embedding"),  # no padding_idx: BLOOM's table has no padding row
    "positional.type": "alibi",
    "positional.*": defaults_except("positional"),
    "attention.type": "mha",
    "attention.head_dim": default_head_dim,
    "attention.*": defaults_except("attention", "num_heads", "head_dim", "dropout"),  # every projection biased
    "norm.type": "layernorm",
    "norm.*": defaults_except("norm", "eps"),
    "ffn.type": "mlp",
    "ffn.activation": "gelu_tanh",
    "ffn.hidden": four_times_wider,
    "ffn.*": defaults_except("ffn", "hidden", "activation"),
    "head.type": "lm",
    "head.*": defaults_except("head", "tie_embeddings"),
}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    d_model = _first(config, "n_embed", "hidden_size")
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": d_model,
        "num_layers": _first(config, "num_hidden_layers", "n_layer"),
        "max_len": TRAINED_LENGTH,
        "norm_position": "pre",
        "embed_norm": True,
        "embedding": {"type": "token"},
        "positional": {"type": "alibi"},
        "attention": {
            "type": "mha",
            "num_heads": _first(config, "num_attention_heads", "n_head"),
            "dropout": config["attention_dropout"],
        },
        "norm": {"type": "layernorm", "eps": config["layer_norm_epsilon"]},
        "ffn": {"type": "mlp", "hidden": 4 * d_model, "activation": "gelu_tanh"},
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
        "dropout": config["hidden_dropout"],
    }


def config(recipe, weights) -> dict[str, Any]:
    return {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "n_layer": recipe.num_layers,
        "n_head": recipe.attention.num_heads,
        "layer_norm_epsilon": recipe.norm.eps,
        "hidden_dropout": recipe.dropout,
        "attention_dropout": recipe.attention.dropout,
        "apply_residual_connection_post_layernorm": False,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


BLOOM = Family(
    name="bloom",
    model_type="bloom",
    classes=("BloomForCausalLM",),
    base_prefix="transformer.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("bloom-560m",),
    unread={
        "pretraining_tp": "with slow_but_exact, the dense layers run as pretraining_tp summed slices: the same matmuls",
        "slow_but_exact": "the order of the sliced matmuls' sums (with pretraining_tp > 1): the same function",
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "BloomForCausalLM",
)
