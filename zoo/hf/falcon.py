"""Falcon (``FalconForCausalLM``): LayerNorm pre-norm decoders with RoPE over whole heads (rotate-half pairs),
a GELU MLP, one ``bias`` flag for every projection and, by default, a tied head. Three layouts of a block:

- Falcon-7B (``new_decoder_architecture: false``, ``parallel_attn: true``): attention and MLP read one shared
  norm in parallel; ``multi_query`` gives one key/value head (MQA), else one per query head (MHA);
- ``parallel_attn: false``: the sequential block (``input_layernorm``, then ``post_attention_layernorm``);
- Falcon-40B/180B (``new_decoder_architecture: true``): ``num_kv_heads`` key/value heads (GQA) and in
  parallel two norms (``ln_attn``, ``ln_mlp``), or one shared with ``num_ln_in_parallel_attn: 1``.

The fused ``query_key_value`` holds, per key/value head, its query heads, its key and its value (zoo's
``grouped_qkv``: Falcon-7B's ``[q (H*D) | k (D) | v (D)]`` is the one-group case). ALiBi models are refused.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from ._common import BIAS_FIELDS, attention_biases, defaults_except, grouped_qkv
from .gpt2 import QKV_BIASES, QKV_WEIGHTS
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
from .rope import ROPE_OPTIONS, SCALING_FIELDS, hf_rope_parameters, rope_parameters, rope_spec, scaling_fits

LAYER, BLOCK = "transformer.h.{i}", "blocks.{i}"


def _sequential(recipe: Any) -> bool:
    return not recipe.block.parallel


def _shared(recipe: Any) -> bool:
    return recipe.block.shared_norm


def _two_norms(recipe: Any) -> bool:
    return recipe.block.parallel and not recipe.block.shared_norm


def _norm(hf: str, zoo: str, when) -> tuple[Rule, ...]:
    return tuple(Rule(f"{LAYER}.{hf}.{k}", f"{BLOCK}.{zoo}.{k}", when=when) for k in ("weight", "bias"))


RULES = (
    Rule("transformer.word_embeddings.weight", "embedding.token.weight"),
    # Which norms a layer has is its block layout: the rows of the other layouts are not in force.
    *_norm("input_layernorm", "attention_norm", lambda r: _sequential(r) or _shared(r)),
    *_norm("post_attention_layernorm", "ffn_norm", _sequential),
    *_norm("ln_attn", "attention_norm", _two_norms),
    *_norm("ln_mlp", "ffn_norm", _two_norms),
    Rule(f"{LAYER}.self_attention.query_key_value.weight", QKV_WEIGHTS, grouped_qkv),
    Rule(f"{LAYER}.self_attention.query_key_value.bias", QKV_BIASES, grouped_qkv),
    *(
        Rule(f"{LAYER}.{hf}.{kind}", f"{BLOCK}.{zoo}.{kind}")
        for hf, zoo in (
            ("self_attention.dense", "attention.o_proj"),
            ("mlp.dense_h_to_4h", "ffn.up_proj"),
            ("mlp.dense_4h_to_h", "ffn.down_proj"),
        )
        for kind in ("weight", "bias")
    ),
    Rule("transformer.ln_f.weight", "final_norm.weight"),
    Rule("transformer.ln_f.bias", "final_norm.bias"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

IGNORED = ("lm_head.weight",)  # the tied copy some checkpoints store

DEFAULTS: dict[str, Any] = {
    "vocab_size": 65024,
    "hidden_size": 4544,
    "num_hidden_layers": 32,
    "num_attention_heads": 71,
    "num_ln_in_parallel_attn": None,
    "layer_norm_epsilon": 1e-5,
    "hidden_dropout": 0.0,
    "num_kv_heads": None,
    "alibi": False,
    "new_decoder_architecture": False,
    "multi_query": True,
    "parallel_attn": True,
    "bias": False,
    "max_position_embeddings": 2048,
    "rope_parameters": None,
    "rope_scaling": None,  # transformers 4
    "rope_theta": 10000.0,  # transformers 4: rope_parameters.rope_theta
    "partial_rotary_factor": 1.0,  # not a Falcon key: Falcon rotates whole heads
    "pad_token_id": None,
    "ffn_hidden_size": None,
    "activation": "gelu",
    "tie_word_embeddings": True,
}

OPTIONS = (
    Option(
        "alibi",
        lambda v: not v,
        "Falcon's ALiBi rounds its slopes to bfloat16 and scales the bias by 1/sqrt(head_dim) with the scores, "
        "over key positions counted from the first real token; zoo's alibi bias is exact and unscaled",
    ),
    *ROPE_OPTIONS,
    Option(
        "rope_parameters.partial_rotary_factor",
        lambda v: v in (None, 1.0),
        "Falcon's default rope rotates whole heads and its scaled ones this fraction: zoo imports whole heads only",
    ),
    activation_option("activation", "Falcon"),
)


def block_layout(config: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """zoo's block and the number of key/value heads of a Falcon config.

    Raises:
        HFImportError: a combination FalconDecoderLayer cannot run (it fails in transformers too).
    """
    heads = config["num_attention_heads"]
    kv_heads = config["num_kv_heads"] or heads
    norms = config["num_ln_in_parallel_attn"]
    if config["new_decoder_architecture"]:
        if not config["parallel_attn"]:
            raise HFImportError(
                "new_decoder_architecture=True with parallel_attn=False is not supported: FalconDecoderLayer "
                "then has no norm for its MLP (transformers fails too)"
            )
        if norms not in (None, 1, 2):
            raise HFImportError(f"num_ln_in_parallel_attn={norms!r} is not supported: Falcon has 1 or 2 norms")
        return {"norm_position": "pre", "parallel": True, "shared_norm": norms == 1}, kv_heads
    if config["parallel_attn"] and norms == 2:
        raise HFImportError(
            "num_ln_in_parallel_attn=2 without new_decoder_architecture is not supported: FalconDecoderLayer "
            "builds ln_attn and ln_mlp but reads input_layernorm (transformers fails too)"
        )
    if not config["multi_query"] and kv_heads != heads:
        raise HFImportError(
            f"num_kv_heads={kv_heads} with multi_query=False and the old decoder is not supported: that fused "
            f"query_key_value holds {heads} key/value heads (transformers fails too)"
        )
    kv_heads = 1 if config["multi_query"] else heads
    if config["parallel_attn"]:
        return {"norm_position": "pre", "parallel": True, "shared_norm": True}, kv_heads
    return {"norm_position": "pre"}, kv_heads


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    d_model, heads = config["hidden_size"], config["num_attention_heads"]
    block, kv_heads = block_layout(config)
    attention: dict[str, Any] = {"type": "mha", "num_heads": heads}
    if kv_heads == 1 and heads > 1:
        attention["type"] = "mqa"
    elif kv_heads != heads:
        attention.update(type="gqa", num_kv_heads=kv_heads)
    params = rope_parameters(config)
    return {
        "hf_family": "falcon",
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": d_model,
        "num_layers": config["num_hidden_layers"],
        "max_len": config["max_position_embeddings"],
        "block": block,
        "embedding": {"type": "token"},
        "attention": {**attention, "bias": bool(config["bias"])},
        "positional": rope_spec(config, params),
        "norm": {"type": "layernorm", "eps": config["layer_norm_epsilon"]},
        "ffn": {
            "type": "mlp",
            "hidden": config["ffn_hidden_size"] or 4 * d_model,
            "activation": ACTIVATIONS[config["activation"]],
            "bias": bool(config["bias"]),
        },
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
        "dropout": config["hidden_dropout"],
    }


def _expressible(recipe: Any) -> str | None:
    """A requirement: a sequential block has one key/value head or one per query head (the old decoder's
    ``multi_query``); grouped heads come with the new decoder, which is always parallel."""
    heads, kv_heads = recipe.attention.num_heads, recipe.attention.num_kv_heads
    if not recipe.block.parallel and kv_heads not in (1, heads):
        return (
            f"attention has {kv_heads} key/value heads for {heads} query heads in a sequential block; Falcon "
            "groups key/value heads only in its parallel (new) decoder: set block.parallel or use 1 or "
            f"{heads} key/value heads"
        )
    return None


def _decoder(recipe: Any) -> dict[str, Any]:
    """The config keys that say which of Falcon's block layouts ``recipe`` has."""
    heads, kv_heads = recipe.attention.num_heads, recipe.attention.num_kv_heads
    new = recipe.block.parallel and (not recipe.block.shared_norm or kv_heads not in (1, heads))
    if new:
        return {
            "new_decoder_architecture": True,
            "num_kv_heads": kv_heads,
            "num_ln_in_parallel_attn": 1 if recipe.block.shared_norm else 2,
            "parallel_attn": True,
            "multi_query": kv_heads == 1,
        }
    return {
        "new_decoder_architecture": False,
        "num_kv_heads": kv_heads,
        "num_ln_in_parallel_attn": None,
        "parallel_attn": recipe.block.parallel,
        "multi_query": kv_heads == 1,
    }


def _one_bias_flag(recipe: Any) -> str | None:
    """A requirement: the MLP biased like the attention (Falcon's one ``bias`` flag)."""
    attention = recipe.attention.biases()["q"]
    if recipe.ffn.bias != attention:
        return f"ffn.bias is {recipe.ffn.bias}, needs {attention} like the attention's (Falcon's one bias flag)"
    return None


REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "block.*": defaults_except("block", "norm_position", "parallel", "shared_norm"),
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.*": defaults_except("embedding"),
    "positional.type": "rope",
    "positional.*": defaults_except("positional", "theta", *SCALING_FIELDS),
    "positional.scaling": scaling_fits,
    "attention.type": ("mha", "gqa", "mqa"),
    "attention.head_dim": default_head_dim,
    "attention.*": defaults_except("attention", "num_heads", "num_kv_heads", "head_dim", *BIAS_FIELDS),
    "attention.biases": attention_biases(o_like_qkv=True),
    "attention.num_kv_heads": _expressible,
    "norm.type": "layernorm",
    "norm.*": defaults_except("norm", "eps"),
    "ffn.type": "mlp",
    "ffn.activation": tuple(HF_ACTIVATIONS),
    "ffn.bias": _one_bias_flag,
    "ffn.*": defaults_except("ffn", "hidden", "activation", "bias"),
    "head.type": "lm",
    "head.*": defaults_except("head", "tie_embeddings"),
}


def config(recipe, weights) -> dict[str, Any]:
    return {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": recipe.attention.num_heads,
        **_decoder(recipe),
        "layer_norm_epsilon": recipe.norm.eps,
        "hidden_dropout": recipe.dropout,
        "attention_dropout": 0.0,
        "alibi": False,
        "bias": recipe.ffn.bias,
        "max_position_embeddings": recipe.max_len,
        "rope_parameters": hf_rope_parameters(recipe.positional),
        "ffn_hidden_size": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "activation": HF_ACTIVATIONS[recipe.ffn.activation],
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


FALCON = Family(
    name="falcon",
    model_type="falcon",
    classes=("FalconForCausalLM",),
    base_prefix="transformer.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("falcon-7b",),
    unread={
        "attention_dropout": "Falcon's rotary attention drops no attention weights (its sequential block uses it "
        "on the attention output, in training only): zoo imports no attention dropout",
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "FalconForCausalLM",
)
