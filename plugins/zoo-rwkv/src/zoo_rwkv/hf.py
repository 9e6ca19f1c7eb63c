"""RWKV-4 (``RwkvForCausalLM``) checkpoints in and out: the family table of transformers' ``rwkv`` model type.

transformers' blocks are zoo's: ``ln1`` is the block's ``attention_norm``, ``ln2`` its ``ffn_norm``, the first
block's ``pre_ln`` zoo's ``embed_norm`` and ``ln_out`` the ``final_norm``; every tensor keeps its shape.
"""

from __future__ import annotations

from typing import Any

from zoo.hf.mapping import Family, Option, Rule, dtype_name, no_layer_overrides

TIME = ("time_decay", "time_first", "time_mix_key", "time_mix_value", "time_mix_receptance")
CHANNEL = ("time_mix_key", "time_mix_receptance")

RULES = (
    Rule("rwkv.embeddings.weight", "embedding.token.weight"),
    Rule("rwkv.blocks.0.pre_ln.weight", "embed_norm.weight"),
    Rule("rwkv.blocks.0.pre_ln.bias", "embed_norm.bias"),
    Rule("rwkv.blocks.{i}.ln1.weight", "blocks.{i}.attention_norm.weight"),
    Rule("rwkv.blocks.{i}.ln1.bias", "blocks.{i}.attention_norm.bias"),
    Rule("rwkv.blocks.{i}.ln2.weight", "blocks.{i}.ffn_norm.weight"),
    Rule("rwkv.blocks.{i}.ln2.bias", "blocks.{i}.ffn_norm.bias"),
    *(Rule(f"rwkv.blocks.{{i}}.attention.{p}", f"blocks.{{i}}.attention.{p}") for p in TIME),
    *(
        Rule(f"rwkv.blocks.{{i}}.attention.{p}.weight", f"blocks.{{i}}.attention.{p}.weight")
        for p in ("key", "value", "receptance", "output")
    ),
    *(Rule(f"rwkv.blocks.{{i}}.feed_forward.{p}", f"blocks.{{i}}.ffn.{p}") for p in CHANNEL),
    *(
        Rule(f"rwkv.blocks.{{i}}.feed_forward.{p}.weight", f"blocks.{{i}}.ffn.{p}.weight")
        for p in ("key", "receptance", "value")
    ),
    Rule("rwkv.ln_out.weight", "final_norm.weight"),
    Rule("rwkv.ln_out.bias", "final_norm.bias"),
    Rule("head.weight", "head.proj.weight"),  # only when untied: a tied head is the token table
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 50277,
    "context_length": 1024,
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "attention_hidden_size": None,
    "intermediate_size": None,
    "layer_norm_epsilon": 1e-5,
    "rescale_every": 6,
    "tie_word_embeddings": False,
    "pad_token_id": None,
}

OPTIONS = (
    Option(
        "layer_norm_epsilon",
        lambda v: v == 1e-5,
        "transformers builds ln_out with LayerNorm's default eps 1e-5 whatever the config says, and zoo's final "
        "norm shares the blocks' eps: only 1e-5 imports exactly",
    ),
)

REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "block.parallel": False,
    "embed_norm": True,
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.scale": False,
    "positional.type": "none",
    "attention.type": "rwkv_time_mix",
    "norm.type": "layernorm",
    "norm.bias": True,
    "norm.affine": True,
    "norm.eps": 1e-5,
    "ffn.type": "rwkv_channel_mix",
    "head.type": "lm",
    "head.bias": False,
    "head.rescale": False,
}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    d_model = config["hidden_size"]
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": d_model,
        "num_layers": config["num_hidden_layers"],
        "max_len": config["context_length"],
        "norm_position": "pre",
        "embed_norm": True,
        "embedding": {"type": "token"},
        "attention": {"type": "rwkv_time_mix", "attention_hidden": config["attention_hidden_size"] or d_model},
        "positional": {"type": "none"},
        "norm": {"type": "layernorm", "eps": config["layer_norm_epsilon"]},
        "ffn": {"type": "rwkv_channel_mix", "hidden": config["intermediate_size"] or 4 * d_model},
        "head": {"type": "lm", "tie_embeddings": config["tie_word_embeddings"]},
    }


def config(recipe: Any, weights: Any) -> dict[str, Any]:
    return {
        "vocab_size": recipe.vocab_size,
        "context_length": recipe.max_len,
        "hidden_size": recipe.d_model,
        "num_hidden_layers": recipe.num_layers,
        "attention_hidden_size": weights["blocks.0.attention.key.weight"].shape[0],
        "intermediate_size": weights["blocks.0.ffn.key.weight"].shape[0],
        "layer_norm_epsilon": recipe.norm.eps,
        "rescale_every": 0,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": 0,
        "eos_token_id": 0,
        "dtype": dtype_name(weights),
    }


RWKV = Family(
    name="rwkv",
    model_type="rwkv",
    classes=("RwkvForCausalLM", "RwkvModel"),
    base_prefix="rwkv.",
    head_prefixes=("head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=(),
    requirements=REQUIREMENTS,
    recipes=("rwkv-4-169m",),
    unread={
        "rescale_every": "halves the stream every n blocks at inference (an fp16 overflow guard) and doubles the "
        "output weights to match: the same function up to the LayerNorm epsilon",
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "RwkvForCausalLM",
    base_class="RwkvModel",
)
