"""Jamba (``JambaForCausalLM``): a hybrid of Mamba and attention layers, with MoE FFNs in some of them.

Every layer is RMSNorm pre-norm, ``x + mixer(norm(x))`` then ``x + ffn(norm(x))``. Layer ``i`` mixes with
attention when ``i % attn_layer_period == attn_layer_offset`` (grouped-query, no biases, no positions of its
own) and with Mamba otherwise (RMSNorms on dt, B and C: zoo's ``mamba`` with ``inner_norms``); its FFN is a
mixture of ``num_experts`` SwiGLU experts when ``i % expert_layer_period == expert_layer_offset`` (a softmax
router whose top-k probabilities are used as they are), a SwiGLU otherwise. In a zoo recipe that is the Mamba
mixer and the SwiGLU as the stack's components, and two ``layers:`` overrides (``select: "offset::period"``) for
the attention layers and the expert layers.
"""

from __future__ import annotations

import math
from typing import Any

from zoo.errors import HFImportError
from zoo.hf.mapping import Family, Option, Rule, dtype_name

from .hf import COMMON_UNREAD
from .hybrid import differences, resolved

__all__ = ["JAMBA"]

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"
MIXER = ("in_proj", "conv1d", "x_proj", "dt_proj", "out_proj")

RULES = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    Rule(f"{LAYER}.input_layernorm.weight", f"{BLOCK}.attention_norm.weight"),
    Rule(f"{LAYER}.pre_ff_layernorm.weight", f"{BLOCK}.ffn_norm.weight"),
    *(Rule(f"{LAYER}.mamba.{m}.{kind}", f"{BLOCK}.attention.{m}.{kind}") for m in MIXER for kind in ("weight", "bias")),
    *(Rule(f"{LAYER}.mamba.{p}", f"{BLOCK}.attention.{p}") for p in ("A_log", "D")),
    *(Rule(f"{LAYER}.mamba.{n}_layernorm.weight", f"{BLOCK}.attention.{n}_layernorm.weight") for n in ("dt", "b", "c")),
    *(Rule(f"{LAYER}.self_attn.{p}_proj.weight", f"{BLOCK}.attention.{p}_proj.weight") for p in "qkvo"),
    *(Rule(f"{LAYER}.feed_forward.{p}_proj.weight", f"{BLOCK}.ffn.{p}_proj.weight") for p in ("gate", "up", "down")),
    Rule(f"{LAYER}.feed_forward.router.weight", f"{BLOCK}.ffn.router.weight"),
    *(
        Rule(f"{LAYER}.feed_forward.experts.{{e}}.{p}_proj.weight", f"{BLOCK}.ffn.experts.{{e}}.{p}_proj.weight")
        for p in ("gate", "up", "down")
    ),
    Rule("model.final_layernorm.weight", "final_norm.weight"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 65536,
    "tie_word_embeddings": False,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "router_aux_loss_coef": 0.001,
    "max_position_embeddings": 262144,
    "attention_dropout": 0.0,
    "num_experts_per_tok": 2,
    "num_experts": 16,
    "expert_layer_period": 2,
    "expert_layer_offset": 1,
    "attn_layer_period": 8,
    "attn_layer_offset": 4,
    "mamba_d_state": 16,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_dt_rank": "auto",
    "mamba_conv_bias": True,
    "mamba_proj_bias": False,
}

OPTIONS = (
    Option("hidden_act", lambda v: v in ("silu", "swish"), "Jamba's Mamba mixer and SwiGLU are computed with silu"),
    Option("attention_dropout", lambda v: v == 0.0, "zoo's attention has no dropout on the probabilities"),
    Option(
        "mamba_dt_rank",
        lambda v: v == "auto" or (isinstance(v, int) and v >= 1),
        "mamba_dt_rank is 'auto' or a positive integer",
    ),
)


def _every(period: int, offset: int) -> str:
    return f"{offset}::{period}"


def jamba_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    """The zoo recipe of a Jamba config: Mamba and SwiGLU layers, overridden by attention and expert layers."""
    E, n = config["hidden_size"], config["num_hidden_layers"]
    for key in ("attn_layer", "expert_layer"):
        period, offset = config[f"{key}_period"], config[f"{key}_offset"]
        if period < 1 or not 0 <= offset < period:
            raise HFImportError(f"{key}_period={period}, {key}_offset={offset}: the offset must be in [0, period)")
    rank = config["mamba_dt_rank"]
    heads, kv = config["num_attention_heads"], config["num_key_value_heads"]
    if E % heads or heads % kv:
        raise HFImportError(
            f"num_attention_heads={heads}, num_key_value_heads={kv}: hidden_size ({E}) must split into the heads, "
            "and the heads into the KV heads"
        )
    swiglu = {"type": "swiglu", "hidden": config["intermediate_size"]}
    layers = []
    if config["attn_layer_offset"] < n:
        attention = {"type": "gqa", "num_heads": heads, "num_kv_heads": kv, "bias": False}
        layers.append(
            {"select": _every(config["attn_layer_period"], config["attn_layer_offset"]), "attention": attention}
        )
    if config["num_experts"] > 1 and config["expert_layer_offset"] < n:
        moe = {
            "type": "moe",
            "num_experts": config["num_experts"],
            "top_k": config["num_experts_per_tok"],
            "expert": swiglu,
            "normalize": False,
            "aux_loss_coef": config["router_aux_loss_coef"],
        }
        layers.append({"select": _every(config["expert_layer_period"], config["expert_layer_offset"]), "ffn": moe})
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "d_model": E,
        "num_layers": n,
        "max_len": min(config["max_position_embeddings"], 1 << 20),
        "norm_position": "pre",
        "embedding": {"type": "token"},
        "attention": {
            "type": "mamba",
            "state_size": config["mamba_d_state"],
            "expand": config["mamba_expand"],
            "conv_kernel": config["mamba_d_conv"],
            "time_step_rank": math.ceil(E / 16) if rank == "auto" else int(rank),
            "bias": bool(config["mamba_proj_bias"]),
            "conv_bias": bool(config["mamba_conv_bias"]),
            "inner_norms": True,
            "norm_eps": config["rms_norm_eps"],
        },
        "positional": {"type": "none"},
        "norm": {"type": "rmsnorm", "eps": config["rms_norm_eps"]},
        "ffn": swiglu,
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
        "layers": layers,
    }


def _pattern(layers: list[int], n: int, what: str) -> tuple[int, int]:
    """(period, offset) with ``layers == [i for i in range(n) if i % period == offset]``."""
    if not layers:
        return n + 1, n  # none: an offset past the last layer
    offset = layers[0]
    period = layers[1] - layers[0] if len(layers) > 1 else n
    if layers != list(range(offset, n, period)) or offset >= period:
        raise ValueError(f"the {what} layers {layers} are not every k-th layer from one below k (Jamba's pattern)")
    return period, offset


def _layout(recipe: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    """((attn period, offset), (expert period, offset)) of a recipe's layers."""
    plan, n = recipe.layer_plan("decoder"), recipe.num_layers
    attention = [i for i, p in enumerate(plan) if p["attention"][0].type != "mamba"]
    experts = [i for i, p in enumerate(plan) if p["ffn"][0].type == "moe"]
    return _pattern(attention, n, "attention"), _pattern(experts, n, "expert")


def jamba_config(recipe: Any, weights: Any) -> dict[str, Any]:
    (attn_period, attn_offset), (expert_period, expert_offset) = _layout(recipe)
    plan = recipe.layer_plan("decoder")
    mamba = recipe.attention
    inner, state, rank, kernel = mamba.sizes(recipe.d_model)
    attention = next((p["attention"][0] for p in plan if p["attention"][0].type != "mamba"), None)
    moe = next((p["ffn"][0] for p in plan if p["ffn"][0].type == "moe"), None)
    said = resolved(attention, recipe.d_model) if attention is not None else {"num_heads": 1, "num_kv_heads": 1}
    return {
        "vocab_size": recipe.vocab_size,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "hidden_size": recipe.d_model,
        "intermediate_size": recipe.ffn.hidden,
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": said["num_heads"],
        "num_key_value_heads": said["num_kv_heads"],
        "hidden_act": "silu",
        "rms_norm_eps": recipe.norm.eps,
        "router_aux_loss_coef": moe.aux_loss_coef if moe is not None else 0.001,
        "max_position_embeddings": recipe.max_len,
        "attention_dropout": 0.0,
        "num_experts_per_tok": moe.top_k if moe is not None else 1,
        "num_experts": moe.num_experts if moe is not None else 1,
        "expert_layer_period": expert_period,
        "expert_layer_offset": expert_offset,
        "attn_layer_period": attn_period,
        "attn_layer_offset": attn_offset,
        "mamba_d_state": state,
        "mamba_d_conv": kernel,
        "mamba_expand": inner // recipe.d_model,
        "mamba_dt_rank": rank,
        "mamba_conv_bias": mamba.conv_bias,
        "mamba_proj_bias": mamba.bias,
        "use_mamba_kernels": False,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "dtype": dtype_name(weights),
    }


def _fits(recipe: Any) -> str | None:
    """A requirement: the recipe is exactly what ``jamba_recipe`` makes of its own Jamba config, layer by layer
    (names the first component that differs and how)."""
    from zoo.recipe import load_recipe

    if recipe.architecture != "decoder" or getattr(recipe.attention, "type", None) != "mamba":
        return "a Jamba stack is a decoder whose base mixer is mamba"
    if recipe.attention.sizes(recipe.d_model)[0] % recipe.d_model:
        return "attention.intermediate_size must be a multiple of d_model (JambaConfig has mamba_expand)"
    if getattr(recipe.ffn, "type", None) != "swiglu" or recipe.ffn.hidden is None:
        return "ffn is a swiglu with its hidden width given (Jamba's MLP)"
    try:
        config = jamba_config(recipe, {})
        expected = load_recipe({"name": recipe.name, **jamba_recipe(config, "JambaForCausalLM", None)})
    except (ValueError, HFImportError) as exc:
        return str(exc)
    return differences(recipe, expected, "Jamba")


JAMBA = Family(
    name="jamba",
    model_type="jamba",
    classes=("JambaForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=("lm_head.weight",),
    requirements={"layers": _fits},
    recipe=jamba_recipe,
    config=jamba_config,
    hf_class=lambda recipe: "JambaForCausalLM",
    recipes=("jamba-v0.1",),
    unread={
        **{k: v for k, v in COMMON_UNREAD.items() if k == "pad_token_id"},
        "use_mamba_kernels": "which implementation transformers runs (deprecated, no effect): the same function",
        "use_mambapy": "which PyTorch scan transformers runs (mambapy's pscan); all compute the same function",
        "use_associative_scan": "which PyTorch scan transformers runs when compiled; all compute the same function",
        "output_router_logits": "whether the forward also returns the router logits: an output, not the network",
    },
)
