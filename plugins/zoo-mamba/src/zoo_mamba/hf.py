"""Hugging Face families of this plugin, joined to zoo's through the ``register_hf_families`` hook.

Mamba (``MambaForCausalLM``) and Mamba-2 (``Mamba2ForCausalLM``) are RMSNorm pre-norm stacks of mixer-only
blocks: ``x + mixer(norm(x))``, a final ``norm_f`` and a tied LM head. In zoo that is a decoder with
``positional: none``, the mixer as its attention and ``ffn: none``. The mixers' parameters have
transformers' names (``in_proj``, ``conv1d``, ``x_proj``, ``dt_proj``, ``A_log``, ``D``, ``dt_bias``, ``norm``,
``out_proj``), so every weight is copied as it is.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from zoo.errors import HFImportError
from zoo.hf.mapping import Family, Option, Rule, dtype_name, no_layer_overrides

__all__ = ["MAMBA", "MAMBA2"]

LAYER, BLOCK = "backbone.layers.{i}", "blocks.{i}"

MAMBA_MIXER = ("in_proj", "conv1d", "x_proj", "dt_proj", "out_proj")
MAMBA2_MIXER = ("in_proj", "conv1d", "norm", "out_proj")


def _rules(linears: tuple[str, ...], parameters: tuple[str, ...]) -> tuple[Rule, ...]:
    return (
        Rule("backbone.embeddings.weight", "embedding.token.weight"),
        Rule(f"{LAYER}.norm.weight", f"{BLOCK}.attention_norm.weight"),
        *(
            Rule(f"{LAYER}.mixer.{m}.{kind}", f"{BLOCK}.attention.{m}.{kind}")
            for m in linears
            for kind in ("weight", "bias")
        ),
        *(Rule(f"{LAYER}.mixer.{p}", f"{BLOCK}.attention.{p}") for p in parameters),
        Rule("backbone.norm_f.weight", "final_norm.weight"),
        Rule("lm_head.weight", "head.proj.weight"),  # only when untied
    )


IGNORED = ("lm_head.weight",)  # the tied copy some checkpoints store


def _layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Older checkpoints name the embedding ``embedding`` (MambaModel's load hook renames it too)."""
    return {n.replace("embedding.weight", "embeddings.weight") if "embedding." in n else n: t for n, t in state.items()}


def _silu(family: str) -> Option:
    return Option("hidden_act", lambda v: v in ("silu", "swish"), f"{family}'s mixer is computed with silu only")


COMMON_UNREAD = {
    "residual_in_fp32": "keeps the residual stream in float32 when the model runs in a lower precision; in float32 "
    "(and for the weights) it changes nothing",
    "time_step_scale": "scales the initial dt_proj weights; imported weights replace them",
    "time_step_init_scheme": "how dt_proj is initialised; imported weights replace it",
    "rescale_prenorm_residual": "an initialisation rule; imported weights replace it",
    "pad_token_id": "a generation setting: Mamba's embedding has no padding row",
}

COMMON_REQUIREMENTS: dict[str, Any] = {
    "architecture": "decoder",
    "block.norm_position": "pre",
    "block.parallel": False,
    "embed_norm": (None, False),
    "final_norm": (None, True),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.scale": False,
    "embedding.padding_idx": None,
    "positional.type": "none",
    "norm.type": "rmsnorm",
    "norm.affine": True,
    "norm.offset": 0.0,
    "ffn.type": "none",
    "head.type": "lm",
    "head.bias": False,
}


def _dt_init(config: dict[str, Any]) -> dict[str, Any]:
    return {"dt_min": config["time_step_min"], "dt_max": config["time_step_max"], "dt_floor": config["time_step_floor"]}


def _stack(config: dict[str, Any], mixer: dict[str, Any]) -> dict[str, Any]:
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "d_model": config["hidden_size"],
        "num_layers": config["num_hidden_layers"],
        "max_len": 2048,  # no position table: any length decodes
        "norm_position": "pre",
        "embedding": {"type": "token"},
        "attention": mixer,
        "positional": {"type": "none"},
        "norm": {"type": "rmsnorm", "eps": config["layer_norm_epsilon"]},
        "ffn": {"type": "none"},
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
    }


def _stack_config(recipe: Any, weights: Any) -> dict[str, Any]:
    return {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "num_hidden_layers": recipe.num_layers,
        "layer_norm_epsilon": recipe.norm.eps,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "hidden_act": "silu",
        "time_step_min": recipe.attention.dt_min,
        "time_step_max": recipe.attention.dt_max,
        "time_step_floor": recipe.attention.dt_floor,
        "use_bias": recipe.attention.bias,
        "use_conv_bias": recipe.attention.conv_bias,
        "conv_kernel": recipe.attention.conv_kernel,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "dtype": dtype_name(weights),
    }


# ---------------------------------------------------------------------------------------------- Mamba

MAMBA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 50280,
    "hidden_size": 768,
    "state_size": 16,
    "num_hidden_layers": 32,
    "layer_norm_epsilon": 1e-5,
    "expand": 2,
    "intermediate_size": None,  # MambaConfig: expand * hidden_size
    "conv_kernel": 4,
    "use_bias": False,
    "use_conv_bias": True,
    "hidden_act": "silu",
    "time_step_rank": "auto",
    "time_step_min": 0.001,
    "time_step_max": 0.1,
    "time_step_floor": 1e-4,
    "tie_word_embeddings": True,
}


def mamba_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    rank = config["time_step_rank"]
    hidden = config["hidden_size"]
    mixer = {
        "type": "mamba",
        "state_size": config["state_size"],
        "intermediate_size": config["intermediate_size"] or config["expand"] * hidden,
        "conv_kernel": config["conv_kernel"],
        "time_step_rank": math.ceil(hidden / 16) if rank == "auto" else int(rank),
        "bias": bool(config["use_bias"]),
        "conv_bias": bool(config["use_conv_bias"]),
        **_dt_init(config),
    }
    return _stack(config, mixer)


def mamba_config(recipe: Any, weights: Any) -> dict[str, Any]:
    inner, state, rank, _ = recipe.attention.sizes(recipe.d_model)
    return {
        **_stack_config(recipe, weights),
        "state_size": state,
        "expand": max(1, inner // recipe.d_model),
        "intermediate_size": inner,
        "time_step_rank": rank,
    }


def _inner_is_read(recipe: Any) -> str | None:
    """MambaConfig rebuilds intermediate_size as int(expand * hidden_size): other widths cannot be written."""
    inner = recipe.attention.sizes(recipe.d_model)[0]
    if inner % recipe.d_model:
        return f"attention.intermediate_size is {inner}, needs a multiple of d_model ({recipe.d_model})"
    return None


MAMBA = Family(
    name="mamba",
    model_type="mamba",
    classes=("MambaForCausalLM",),
    base_prefix="backbone.",
    head_prefixes=("lm_head.",),
    defaults=MAMBA_DEFAULTS,
    options=(
        _silu("Mamba"),
        Option(
            "time_step_rank",
            lambda v: v == "auto" or (isinstance(v, int) and v >= 1),
            "time_step_rank is 'auto' or a positive integer",
        ),
    ),
    rules=_rules(MAMBA_MIXER, ("A_log", "D")),
    ignored=IGNORED,
    requirements={
        **COMMON_REQUIREMENTS,
        "attention.type": "mamba",
        "attention.intermediate_size": _inner_is_read,
        "attention.inner_norms": False,  # FalconMamba's (zoo_mamba/falcon_mamba.py)
    },
    recipe=mamba_recipe,
    config=mamba_config,
    hf_class=lambda recipe: "MambaForCausalLM",
    layout=_layout,
    recipes=("mamba-130m",),
    unread={
        **COMMON_UNREAD,
        "use_mambapy": "which PyTorch scan transformers runs (mambapy's pscan); all compute the same function",
        "use_associative_scan": "which PyTorch scan transformers runs when compiled; all compute the same function",
    },
)

# ---------------------------------------------------------------------------------------------- Mamba-2

MAMBA2_DEFAULTS: dict[str, Any] = {
    "num_heads": 128,
    "head_dim": 64,
    "vocab_size": 32768,
    "hidden_size": 4096,
    "state_size": 128,
    "num_hidden_layers": 64,
    "layer_norm_epsilon": 1e-5,
    "expand": 2,
    "conv_kernel": 4,
    "n_groups": 8,
    "use_bias": False,
    "use_conv_bias": True,
    "hidden_act": "silu",
    "time_step_min": 0.001,
    "time_step_max": 0.1,
    "time_step_floor": 1e-4,
    "time_step_limit": (0.0, float("inf")),
    "chunk_size": 256,
    "tie_word_embeddings": False,
}


def mamba2_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    inner = int(config["expand"] * config["hidden_size"])
    if config["num_heads"] * config["head_dim"] != inner:
        raise HFImportError(
            f"num_heads * head_dim ({config['num_heads']} * {config['head_dim']}) must equal expand * hidden_size "
            f"({inner}): Mamba2Mixer splits its inner width into the heads"
        )
    mixer = {
        "type": "mamba2",
        "head_dim": config["head_dim"],
        "expand": int(config["expand"]),
        "num_groups": config["n_groups"],
        "state_size": config["state_size"],
        "conv_kernel": config["conv_kernel"],
        "chunk_size": config["chunk_size"],
        "bias": bool(config["use_bias"]),
        "conv_bias": bool(config["use_conv_bias"]),
        "norm_eps": config["layer_norm_epsilon"],
        **_dt_init(config),
    }
    return _stack(config, mixer)


def mamba2_config(recipe: Any, weights: Any) -> dict[str, Any]:
    a = recipe.attention
    return {
        **_stack_config(recipe, weights),
        "num_heads": a.expand * recipe.d_model // a.head_dim,
        "head_dim": a.head_dim,
        "state_size": a.state_size,
        "expand": a.expand,
        "n_groups": a.num_groups,
        "chunk_size": a.chunk_size,
        "time_step_limit": [0.0, float("inf")],
    }


def _no_step_limit(value: Any) -> bool:
    """``time_step_limit`` is (0, inf): no clamp (config.json writes inf as ``{"__float__": "Infinity"}``)."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return False
    high = value[1]
    if isinstance(high, dict):
        high = float(high.get("__float__", "nan"))
    return float(value[0]) == 0.0 and high == float("inf")


def _one_eps(recipe: Any) -> str | None:
    """Mamba2Config has one layer_norm_epsilon for the block norms and the mixer's gated norm."""
    if recipe.attention.norm_eps != recipe.norm.eps:
        return f"attention.norm_eps is {recipe.attention.norm_eps}, needs norm.eps ({recipe.norm.eps})"
    return None


MAMBA2 = Family(
    name="mamba2",
    model_type="mamba2",
    classes=("Mamba2ForCausalLM",),
    base_prefix="backbone.",
    head_prefixes=("lm_head.",),
    defaults=MAMBA2_DEFAULTS,
    options=(
        _silu("Mamba-2"),
        Option(
            "time_step_limit",
            _no_step_limit,
            "zoo's mamba2 does not clamp the step size (transformers' recurrent step does not either)",
        ),
    ),
    rules=_rules(MAMBA2_MIXER, ("dt_bias", "A_log", "D")),
    ignored=IGNORED,
    requirements={**COMMON_REQUIREMENTS, "attention.type": "mamba2", "attention.norm_eps": _one_eps},
    recipe=mamba2_recipe,
    config=mamba2_config,
    hf_class=lambda recipe: "Mamba2ForCausalLM",
    layout=_layout,
    recipes=("mamba2-130m",),
    unread={
        **COMMON_UNREAD,
        "time_step_rank": "defined by Mamba2Config but used by no Mamba-2 module",
    },
)
