"""Phi-1, Phi-1.5 and Phi-2 (``PhiForCausalLM``): LayerNorm pre-norm decoders whose attention and MLP read one
shared norm of the block's input in parallel, RoPE over the first ``partial_rotary_factor`` of each head
(rotate-half pairs), biased attention (MHA or GQA) and MLP, optional LayerNorms of the queries and keys over
each head (``qk_layernorm``: one norm shared by all heads, zoo's ``qk_norm``), and an untied LM head with a bias.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from ._common import BIAS_FIELDS, attention_biases, defaults_except
from ._llama_legacy import token_embedding
from .mapping import (
    ACTIVATIONS,
    HF_ACTIVATIONS,
    Family,
    Option,
    Rule,
    activation_option,
    dtype_name,
    no_layer_overrides,
)
from .rope import ROPE_OPTIONS, SCALING_FIELDS, hf_partial_rope, partial_rope, same_rotary_dims, scaling_fits

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"

RULES = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    *(
        Rule(f"{LAYER}.{hf}.{kind}", f"{BLOCK}.{zoo}.{kind}")
        for hf, zoo in (
            ("input_layernorm", "attention_norm"),
            *((f"self_attn.{p}_proj", f"attention.{p}_proj") for p in "qkv"),
            ("self_attn.dense", "attention.o_proj"),
            ("self_attn.q_layernorm", "attention.q_norm"),  # only with qk_layernorm
            ("self_attn.k_layernorm", "attention.k_norm"),
            ("mlp.fc1", "ffn.up_proj"),
            ("mlp.fc2", "ffn.down_proj"),
        )
        for kind in ("weight", "bias")
    ),
    Rule("model.final_layernorm.weight", "final_norm.weight"),
    Rule("model.final_layernorm.bias", "final_norm.bias"),
    Rule("lm_head.weight", "head.proj.weight"),
    Rule("lm_head.bias", "head.proj.bias"),
)

IGNORED = ("model.layers.{i}.self_attn.rotary_emb.inv_freq",)  # a buffer of older checkpoints

DEFAULTS: dict[str, Any] = {
    "vocab_size": 51200,
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 24,
    "num_attention_heads": 32,
    "num_key_value_heads": None,
    "head_dim": None,  # not a PhiConfig attribute, but PhiAttention reads one a config.json gives
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "attention_dropout": 0.0,
    "hidden_act": "gelu_new",
    "max_position_embeddings": 2048,
    "layer_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "rope_parameters": None,
    "rope_scaling": None,  # transformers 4
    "rope_theta": 10000.0,  # transformers 4: rope_parameters.rope_theta
    "partial_rotary_factor": 0.5,  # transformers 4: rope_parameters.partial_rotary_factor
    "qk_layernorm": False,
    "pad_token_id": None,
}

OPTIONS = (
    *ROPE_OPTIONS,
    activation_option("hidden_act", "Phi"),
    Option(
        "tie_word_embeddings",
        lambda v: not v,
        "Phi's LM head has a bias, and zoo's tied head has none (tie_embeddings excludes bias)",
    ),
)


def head_dim(config: dict[str, Any]) -> int:
    """PhiAttention's head width: ``head_dim`` where a config.json gives one, else hidden_size / heads."""
    return config["head_dim"] or config["hidden_size"] // config["num_attention_heads"]


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    d_model, heads = config["hidden_size"], config["num_attention_heads"]
    kv_heads = config["num_key_value_heads"] or heads
    width = head_dim(config)
    attention: dict[str, Any] = {"type": "mha", "num_heads": heads}
    if kv_heads != heads:
        attention.update(type="gqa", num_kv_heads=kv_heads)
    if width * heads != d_model:
        attention["head_dim"] = width
    if config["qk_layernorm"]:
        if width != d_model // heads:
            raise HFImportError(
                f"qk_layernorm with head_dim={width} is not supported: Phi's query/key norms are "
                f"hidden_size / heads = {d_model // heads} wide (transformers fails too)"
            )
        attention["qk_norm"] = {"type": "layernorm", "eps": config["layer_norm_eps"]}
    return {
        "hf_family": "phi",
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": d_model,
        "num_layers": config["num_hidden_layers"],
        "max_len": config["max_position_embeddings"],
        "block": {"norm_position": "pre", "parallel": True, "shared_norm": True},
        "embedding": token_embedding(config),
        "attention": {**attention, "bias": True, "dropout": config["attention_dropout"]},
        "positional": partial_rope(config, width),
        "norm": {"type": "layernorm", "eps": config["layer_norm_eps"]},
        "ffn": {
            "type": "mlp",
            "hidden": config["intermediate_size"],
            "activation": ACTIVATIONS[config["hidden_act"]],
        },
        "head": {"type": "lm", "tie_embeddings": False, "bias": True},
        "dropout": config["resid_pdrop"],
    }


def _qk_layernorm(recipe: Any) -> str | None:
    """A requirement: no query/key norm, or Phi's: a LayerNorm of each head's dims (shared by the heads) with
    the model's eps, at hidden_size / heads."""
    spec = recipe.attention.qk_norm
    if spec is None:
        return None
    spec = {"type": spec} if isinstance(spec, str) else dict(spec)
    wanted = {"type": "layernorm", "eps": recipe.norm.eps, "bias": True, "affine": True}
    found = {"eps": 1e-5, "bias": True, "affine": True, **spec}
    if found != wanted:
        return f"attention.qk_norm is {spec}, needs {{type: layernorm, eps: {recipe.norm.eps}}} (Phi's qk_layernorm)"
    if recipe.attention.head_dim_for(recipe.d_model) * recipe.attention.num_heads != recipe.d_model:
        return "attention.qk_norm needs head_dim = d_model / num_heads (Phi's query/key norms are that wide)"
    return None


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
    "embedding.*": defaults_except("embedding", "padding_idx"),
    "positional.type": "rope",
    "positional.*": defaults_except("positional", "theta", "rotary_fraction", *SCALING_FIELDS),
    "positional.rotary_fraction": same_rotary_dims,
    "positional.scaling": scaling_fits,
    "attention.type": ("mha", "gqa", "mqa"),
    "attention.*": defaults_except(
        "attention", "num_heads", "num_kv_heads", "head_dim", "dropout", "qk_norm", *BIAS_FIELDS
    ),
    "attention.biases": attention_biases(qkv=True, o=True),
    "attention.qk_norm": _qk_layernorm,
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


def config(recipe, weights) -> dict[str, Any]:
    return {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "intermediate_size": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": recipe.attention.num_heads,
        "num_key_value_heads": recipe.attention.num_kv_heads,
        "head_dim": recipe.attention.head_dim_for(recipe.d_model),
        "resid_pdrop": recipe.dropout,
        "embd_pdrop": recipe.dropout,
        "attention_dropout": recipe.attention.dropout,
        "hidden_act": HF_ACTIVATIONS[recipe.ffn.activation],
        "max_position_embeddings": recipe.max_len,
        "layer_norm_eps": recipe.norm.eps,
        "tie_word_embeddings": False,
        "rope_parameters": hf_partial_rope(recipe.positional),
        "qk_layernorm": recipe.attention.qk_norm is not None,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


PHI = Family(
    name="phi",
    model_type="phi",
    classes=("PhiForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("phi-2",),
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "PhiForCausalLM",
)
