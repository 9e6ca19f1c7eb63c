"""Llama (``LlamaForCausalLM``) and Mixtral (``MixtralForCausalLM``): RMSNorm pre-norm decoders with RoPE
(half rotation, zoo's default) and grouped-query attention; Llama's FFN is SwiGLU, Mixtral's a top-k
mixture of SwiGLU experts (``w1`` gate, ``w3`` up, ``w2`` down). ``hidden_act: gelu_pytorch_tanh`` is zoo's
``geglu`` with ``approximate: tanh``; Mixtral's ``sliding_window`` is the attention's ``window``, while a
``sliding_window`` on a Llama config is refused (LlamaForCausalLM would ignore it). Mistral, Qwen2, Qwen3 and
StarCoder2 (``zoo/hf/<family>.py``) reuse these helpers.

Transformers 5 holds Mixtral's experts fused in memory (``mlp.experts.gate_up_proj``, ``down_proj``) but
``save_pretrained`` writes the per-expert layout; both import.
"""

from __future__ import annotations

from typing import Any

import torch

from .mapping import (
    GATED_FFNS,
    Family,
    Option,
    Rule,
    dtype_name,
    no_layer_overrides,
)
from .rope import ROPE_OPTIONS, hf_rope_parameters, rope_spec, scaling_fits

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"

ATTENTION = tuple(
    Rule(f"{LAYER}.self_attn.{p}_proj.{kind}", f"{BLOCK}.attention.{p}_proj.{kind}")
    for p in "qkvo"
    for kind in ("weight", "bias")
)

COMMON = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    Rule(f"{LAYER}.input_layernorm.weight", f"{BLOCK}.attention_norm.weight"),
    *ATTENTION,
    Rule(f"{LAYER}.post_attention_layernorm.weight", f"{BLOCK}.ffn_norm.weight"),
    Rule("model.norm.weight", "final_norm.weight"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

LLAMA_RULES = (
    *COMMON,
    *(
        Rule(f"{LAYER}.mlp.{p}_proj.{kind}", f"{BLOCK}.ffn.{p}_proj.{kind}")
        for p in ("gate", "up", "down")
        for kind in ("weight", "bias")
    ),
)

MOE, EXPERT = f"{LAYER}.block_sparse_moe", f"{BLOCK}.ffn.experts.{{e}}"

MIXTRAL_RULES = (
    *COMMON,
    Rule(f"{MOE}.gate.weight", f"{BLOCK}.ffn.router.weight"),
    Rule(f"{MOE}.experts.{{e}}.w1.weight", f"{EXPERT}.gate_proj.weight"),
    Rule(f"{MOE}.experts.{{e}}.w3.weight", f"{EXPERT}.up_proj.weight"),
    Rule(f"{MOE}.experts.{{e}}.w2.weight", f"{EXPERT}.down_proj.weight"),
)

IGNORED = (
    "model.layers.{i}.self_attn.rotary_emb.inv_freq",  # a buffer of older checkpoints
    "lm_head.weight",  # the tied copy of embed_tokens some checkpoints store
)

LLAMA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": None,
    "head_dim": None,
    "hidden_act": "silu",
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
    "rope_parameters": None,
    "rope_scaling": None,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "mlp_bias": False,
    "pad_token_id": None,
}

MIXTRAL_DEFAULTS: dict[str, Any] = {
    **LLAMA_DEFAULTS,
    "intermediate_size": 14336,
    "num_key_value_heads": 8,
    "max_position_embeddings": 4096 * 32,
    "rms_norm_eps": 1e-5,
    "rope_theta": 1e6,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "router_aux_loss_coef": 0.001,
    "router_jitter_noise": 0.0,
    "sliding_window": None,
}

GATED: dict[str, dict[str, Any]] = {
    **{act: {"type": ffn} for act, ffn in GATED_FFNS.items()},
    "gelu_pytorch_tanh": {"type": "geglu", "approximate": "tanh"},
}
"""Llama's ``hidden_act`` -> the zoo gated FFN that computes it exactly (without its width)."""


def hidden_act(ffn: Any) -> str:
    """The ``hidden_act`` of a zoo gated FFN (a config or a spec dict): the way back of ``GATED``."""
    spec = ffn if isinstance(ffn, dict) else ffn.model_dump()
    if spec["type"] == "geglu" and spec.get("approximate", "none") == "tanh":
        return "gelu_pytorch_tanh"
    return ACTS[spec["type"]]


LLAMA_OPTIONS = (
    *ROPE_OPTIONS,
    Option(
        "rope_parameters.partial_rotary_factor",
        lambda v: v in (None, 1.0),
        "Llama-family attention rotates every head dim",
    ),
    Option(
        "hidden_act",
        lambda v: v in GATED,
        f"zoo's gated FFNs apply {', '.join(GATED)} exactly (swiglu, geglu, reglu, geglu with approximate: tanh)",
    ),
)

NO_WINDOW = Option(
    "sliding_window",
    lambda v: v is None,
    "LlamaForCausalLM ignores it and attends to every key, so the checkpoint was likely trained with a window "
    "it does not apply; import it as model_type mistral (MistralForCausalLM applies the window)",
)
"""A Mistral-style key on a Llama config: refused rather than imported as full attention."""

MIXTRAL_OPTIONS = (
    *LLAMA_OPTIONS,
    Option(
        "router_jitter_noise",
        lambda v: not v,
        "zoo's router does not multiply its input by training noise",
    ),
)


def _attention(config: dict[str, Any], bias: bool) -> dict[str, Any]:
    heads = config["num_attention_heads"]
    kv_heads = config["num_key_value_heads"] or heads
    spec: dict[str, Any] = {"type": "mha", "num_heads": heads}
    if kv_heads != heads:
        spec.update(type="gqa", num_kv_heads=kv_heads)
    if config["head_dim"] is not None:
        spec["head_dim"] = config["head_dim"]
    return {**spec, "bias": bias, "dropout": config["attention_dropout"]}


def token_embedding(config: dict[str, Any]) -> dict[str, Any]:
    """The token embedding spec: ``nn.Embedding(vocab_size, hidden_size, padding_idx=pad_token_id)`` as HF has it."""
    pad = config["pad_token_id"]
    embedding: dict[str, Any] = {"type": "token"}
    if pad is not None and 0 <= pad < config["vocab_size"]:
        embedding["padding_idx"] = pad
    return embedding


def _recipe(config: dict[str, Any], ffn: dict[str, Any], bias: bool) -> dict[str, Any]:
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": config["pad_token_id"],
        "d_model": config["hidden_size"],
        "num_layers": config["num_hidden_layers"],
        "max_len": config["max_position_embeddings"],
        "norm_position": "pre",
        "embedding": token_embedding(config),
        "attention": _attention(config, bias),
        "positional": rope_spec(config),
        "norm": {"type": "rmsnorm", "eps": config["rms_norm_eps"]},
        "ffn": ffn,
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
    }


def llama_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    ffn = {**GATED[config["hidden_act"]], "hidden": config["intermediate_size"], "bias": config["mlp_bias"]}
    return _recipe(config, ffn, bool(config["attention_bias"]))


def mixtral_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    ffn = {
        "type": "moe",
        "num_experts": config["num_local_experts"],
        "top_k": config["num_experts_per_tok"],
        "expert": {**GATED[config["hidden_act"]], "hidden": config["intermediate_size"]},
        "aux_loss_coef": config["router_aux_loss_coef"],
    }
    recipe = _recipe(config, ffn, False)
    if config["sliding_window"] is not None:
        recipe["attention"]["window"] = config["sliding_window"]
    return recipe


ACTS = {ffn: act for act, ffn in GATED_FFNS.items()}


def _config(recipe, weights, ffn: Any, intermediate: str) -> dict[str, Any]:
    theta = recipe.positional.theta
    return {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "intermediate_size": weights[intermediate].shape[0],
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": recipe.attention.num_heads,
        "num_key_value_heads": recipe.attention.num_kv_heads,
        "head_dim": recipe.attention.head_dim_for(recipe.d_model),
        "hidden_act": hidden_act(ffn),
        "max_position_embeddings": recipe.max_len,
        "rms_norm_eps": recipe.norm.eps,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "rope_parameters": hf_rope_parameters(recipe.positional),
        "rope_theta": theta,
        "attention_dropout": recipe.attention.dropout,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


def llama_config(recipe, weights) -> dict[str, Any]:
    return {
        **_config(recipe, weights, recipe.ffn, "blocks.0.ffn.up_proj.weight"),
        "attention_bias": recipe.attention.bias,
        "mlp_bias": recipe.ffn.bias,
    }


def mixtral_config(recipe, weights) -> dict[str, Any]:
    return {
        **_config(recipe, weights, recipe.ffn.expert, "blocks.0.ffn.experts.0.up_proj.weight"),
        "num_local_experts": recipe.ffn.num_experts,
        "num_experts_per_tok": recipe.ffn.top_k,
        "router_aux_loss_coef": recipe.ffn.aux_loss_coef,
        "router_jitter_noise": 0.0,
        "sliding_window": recipe.attention.window,
    }


def _fits_expert(recipe) -> str | None:
    expert = recipe.ffn.expert
    if expert.type not in ACTS:
        return f"ffn.expert.type is {expert.type!r}, needs one of {', '.join(map(repr, ACTS))}"
    if getattr(expert, "bias", False):
        return "ffn.expert.bias is True, needs False (Mixtral's experts have no biases)"
    return None


COMMON_REQUIREMENTS = {
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
    "attention.q_bias": None,  # one attention_bias for all four projections
    "attention.k_bias": None,
    "attention.v_bias": None,
    "attention.o_bias": None,
    "attention.softcap": None,
    "attention.qk_norm": None,
    "attention.rotary": None,
    "norm.type": "rmsnorm",
    "norm.affine": True,
    "norm.offset": 0.0,  # Gemma's (1 + w) scale
    "head.type": "lm",
    "head.bias": False,
    "head.rescale": False,
    "head.softcap": None,
}

LLAMA_REQUIREMENTS = {**COMMON_REQUIREMENTS, "attention.window": None, "ffn.type": tuple(ACTS)}

MIXTRAL_REQUIREMENTS = {
    **COMMON_REQUIREMENTS,
    "attention.bias": False,
    "ffn.type": "moe",
    "ffn.shared_expert": None,
    "ffn.expert": _fits_expert,
    "ffn.normalize": True,  # Mixtral's router: top-k softmax renormalised, no bias, no groups, no scaling
    "ffn.scoring": "softmax",
    "ffn.correction_bias": False,
    "ffn.n_group": 1,
    "ffn.routed_scaling_factor": 1.0,
}


def unfuse_experts(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Transformers 5's in-memory Mixtral layout -> the per-expert layout that ``save_pretrained`` writes.

    ``mlp.experts.gate_up_proj`` (X, 2H, E) holds each expert's w1 (gate) then w3 (up);
    ``mlp.experts.down_proj`` (X, E, H) each expert's w2; ``mlp.gate`` is the router.
    """
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        layer, _, leaf = name.partition(".mlp.experts.")
        experts = f"{layer}.block_sparse_moe.experts"
        if leaf == "gate_up_proj":
            for e, (w1, w3) in enumerate(zip(*tensor.chunk(2, dim=1), strict=True)):
                out[f"{experts}.{e}.w1.weight"], out[f"{experts}.{e}.w3.weight"] = w1, w3
        elif leaf == "down_proj":
            for e, w2 in enumerate(tensor.unbind(0)):
                out[f"{experts}.{e}.w2.weight"] = w2
        else:
            out[name.replace(".mlp.gate.", ".block_sparse_moe.gate.")] = tensor
    return out


LLAMA = Family(
    name="llama",
    model_type="llama",
    classes=("LlamaForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=LLAMA_DEFAULTS,
    options=(*LLAMA_OPTIONS, NO_WINDOW),
    rules=LLAMA_RULES,
    ignored=IGNORED,
    requirements=LLAMA_REQUIREMENTS,
    recipes=("llama-3.2-1b", "llama-3-70b"),
    unread={"pretraining_tp": "how Meta sliced the projections across devices to pretrain: the same matmuls"},
    recipe=llama_recipe,
    config=llama_config,
    hf_class=lambda recipe: "LlamaForCausalLM",
)

MIXTRAL = Family(
    name="mixtral",
    model_type="mixtral",
    classes=("MixtralForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=MIXTRAL_DEFAULTS,
    options=MIXTRAL_OPTIONS,
    rules=MIXTRAL_RULES,
    ignored=IGNORED,
    requirements=MIXTRAL_REQUIREMENTS,
    recipes=("mixtral-8x7b",),
    recipe=mixtral_recipe,
    config=mixtral_config,
    hf_class=lambda recipe: "MixtralForCausalLM",
    layout=unfuse_experts,
)
