"""OLMo 2 (``Olmo2ForCausalLM``): Llama's network with its norms moved onto each sub-layer's output inside the
residual (``x + norm(f(x))``, no norm of the input: zoo's ``norm_position: output``) and QK-norm, one RMSNorm
over all of a projection's query features and one over the keys' (``qk_norm_scope: projection``), before RoPE.
One ``attention_bias`` for all four projections; a bias-free gated MLP; an untied head by default.
"""

from __future__ import annotations

from typing import Any

from ._common import defaults_except
from .llama import ACTS, GATED, LLAMA_DEFAULTS, _attention, hidden_act, token_embedding
from .mapping import Family, Option, Rule, dtype_name, no_layer_overrides
from .opt import padding_is_pad
from .rope import ROPE_OPTIONS, SCALING_FIELDS, hf_rope_parameters, rope_spec, scaling_fits

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"

RULES = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    *(
        Rule(f"{LAYER}.self_attn.{p}_proj.{kind}", f"{BLOCK}.attention.{p}_proj.{kind}")
        for p in "qkvo"
        for kind in ("weight", "bias")
    ),
    Rule(f"{LAYER}.self_attn.q_norm.weight", f"{BLOCK}.attention.q_norm.weight"),
    Rule(f"{LAYER}.self_attn.k_norm.weight", f"{BLOCK}.attention.k_norm.weight"),
    Rule(f"{LAYER}.post_attention_layernorm.weight", f"{BLOCK}.attention_post_norm.weight"),
    *(Rule(f"{LAYER}.mlp.{p}_proj.weight", f"{BLOCK}.ffn.{p}_proj.weight") for p in ("gate", "up", "down")),
    Rule(f"{LAYER}.post_feedforward_layernorm.weight", f"{BLOCK}.ffn_post_norm.weight"),
    Rule("model.norm.weight", "final_norm.weight"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

IGNORED = (
    "model.layers.{i}.self_attn.rotary_emb.inv_freq",  # a buffer of older checkpoints
    "lm_head.weight",  # the tied copy of embed_tokens some checkpoints store
)

DEFAULTS: dict[str, Any] = {
    **{k: v for k, v in LLAMA_DEFAULTS.items() if k not in ("mlp_bias", "pretraining_tp")},
    "vocab_size": 50304,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "pad_token_id": 1,
    "head_dim": None,  # not an Olmo2Config field, but Olmo2Attention reads one a config.json gives
}

OPTIONS = (
    *ROPE_OPTIONS,
    Option(
        "hidden_act",
        lambda v: v in GATED,
        f"zoo's gated FFNs apply {', '.join(GATED)} exactly (swiglu, geglu, reglu, geglu with approximate: tanh)",
    ),
)


def qk_norm_over_projections(recipe: Any) -> str | None:
    """A requirement: QK-norm by the recipe's own RMSNorm over each whole projection (OLMo 2 builds q_norm and
    k_norm with ``rms_norm_eps`` at the width of all query heads and of all key heads)."""
    attention = recipe.attention
    qk_norm = attention.qk_norm
    spec = None if qk_norm is None else qk_norm.model_dump()
    if qk_norm != recipe.norm or attention.qk_norm_scope != "projection":
        return (
            f"attention.qk_norm is {spec!r} over {attention.qk_norm_scope!r}, needs the recipe's norm "
            f"({recipe.norm.model_dump()}) over each projection (OLMo 2's q_norm and k_norm)"
        )
    return None


def one_bias(recipe: Any) -> str | None:
    """A requirement: all four projections biased, or none (OLMo 2's one ``attention_bias``)."""
    on = recipe.attention.biases()
    return None if len(set(on.values())) == 1 else f"attention biases are {on}, need all or none (attention_bias)"


REQUIREMENTS = {
    "architecture": "decoder",
    "block.norm_position": "output",
    "block.*": defaults_except("block", "norm_position"),
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.*": defaults_except("embedding", "padding_idx"),
    "embedding.padding_idx": padding_is_pad,
    "positional.type": "rope",
    "positional.*": defaults_except("positional", "theta", *SCALING_FIELDS),
    "positional.scaling": scaling_fits,
    "attention.type": ("mha", "gqa", "mqa"),
    "attention.*": defaults_except(
        "attention", "num_heads", "num_kv_heads", "head_dim", "dropout", "bias", "qk_norm", "qk_norm_scope"
    ),
    "attention.biases": one_bias,
    "attention.qk_norm": qk_norm_over_projections,
    "norm.type": "rmsnorm",
    "norm.*": defaults_except("norm", "eps"),
    "ffn.type": tuple(ACTS),
    "ffn.*": defaults_except("ffn", "hidden", "approximate"),  # no biases
    "head.type": "lm",
    "head.*": defaults_except("head", "tie_embeddings"),
}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    norm = {"type": "rmsnorm", "eps": config["rms_norm_eps"]}
    attention = _attention(config, bool(config["attention_bias"]))
    attention.update(qk_norm=norm, qk_norm_scope="projection")
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": config["hidden_size"],
        "num_layers": config["num_hidden_layers"],
        "max_len": config["max_position_embeddings"],
        "norm_position": "output",
        "embedding": token_embedding(config),
        "attention": attention,
        "positional": rope_spec(config),
        "norm": norm,
        "ffn": {**GATED[config["hidden_act"]], "hidden": config["intermediate_size"], "bias": False},
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
    }


def config(recipe, weights) -> dict[str, Any]:
    attention = recipe.attention
    out = {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "intermediate_size": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": attention.num_heads,
        "num_key_value_heads": attention.num_kv_heads,
        "hidden_act": hidden_act(recipe.ffn),
        "max_position_embeddings": recipe.max_len,
        "rms_norm_eps": recipe.norm.eps,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "rope_parameters": hf_rope_parameters(recipe.positional),
        "rope_theta": recipe.positional.theta,
        "attention_bias": attention.biases()["q"],
        "attention_dropout": attention.dropout,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }
    if attention.head_dim_for(recipe.d_model) * attention.num_heads != recipe.d_model:
        out["head_dim"] = attention.head_dim_for(recipe.d_model)  # read by Olmo2Attention, not an Olmo2Config field
    return out


OLMO2 = Family(
    name="olmo2",
    model_type="olmo2",
    classes=("Olmo2ForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("olmo-2-1b",),
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "Olmo2ForCausalLM",
)
