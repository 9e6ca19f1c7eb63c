"""Bamba (``BambaForCausalLM``, IBM's Bamba-9B): Mamba-2 mixers with grouped-query attention in a few layers.

Every layer is RMSNorm pre-norm, ``x + mixer(norm(x))`` then ``x + swiglu(norm(x))``. Layer ``i`` mixes with
attention when ``i`` is in ``attn_layer_indices`` (GQA, RoPE over the first half of each head: transformers'
BambaConfig fixes ``partial_rotary_factor`` at 0.5 unless ``rope_parameters`` gives its own), with Mamba-2's SSD
otherwise (``BambaMixer`` computes what ``Mamba2Mixer`` does: zoo's ``mamba2``, its gated RMSNorm's epsilon the
stack's ``rms_norm_eps``). The Mamba-2 layers take no positions, so in a zoo recipe the stack's positional is
``none``, its mixer ``mamba2``, and one ``layers:`` override gives the attention layers GQA with their own
``rotary`` encoding.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError
from zoo.hf.mapping import Family, Option, Rule, dtype_name
from zoo.hf.rope import (
    ROPE_OPTIONS,
    hf_partial_rope,
    hf_rotary_dims,
    rope_spec,
    rotary_fraction,
    scaling_fits,
    scaling_parameters,
)
from zoo.limits import MAX_POSITIONS

from .hf import MAMBA2_MIXER, _no_step_limit
from .hybrid import TOP, differences, resolved

__all__ = ["BAMBA"]

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"
BOTH = ("weight", "bias")

RULES = (
    Rule("model.embed_tokens.weight", "embedding.token.weight"),
    Rule(f"{LAYER}.input_layernorm.weight", f"{BLOCK}.attention_norm.weight"),
    Rule(f"{LAYER}.pre_ff_layernorm.weight", f"{BLOCK}.ffn_norm.weight"),
    *(Rule(f"{LAYER}.mamba.{m}.{kind}", f"{BLOCK}.attention.{m}.{kind}") for m in MAMBA2_MIXER for kind in BOTH),
    *(Rule(f"{LAYER}.mamba.{p}", f"{BLOCK}.attention.{p}") for p in ("dt_bias", "A_log", "D")),
    *(
        Rule(f"{LAYER}.self_attn.{p}_proj.{kind}", f"{BLOCK}.attention.{p}_proj.{kind}")
        for p in "qkvo"
        for kind in BOTH
    ),
    *(
        Rule(f"{LAYER}.feed_forward.{p}_proj.{kind}", f"{BLOCK}.ffn.{p}_proj.{kind}")
        for p in ("gate", "up", "down")
        for kind in BOTH
    ),
    Rule("model.final_layernorm.weight", "final_norm.weight"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)

DEFAULTS: dict[str, Any] = {
    "vocab_size": 128000,
    "tie_word_embeddings": False,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": None,  # not a BambaConfig field, but BambaAttention reads it where a config.json has it
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "pad_token_id": 0,
    "max_position_embeddings": 262144,
    "attention_dropout": 0.0,
    "attention_bias": False,
    "mlp_bias": False,
    "attn_layer_indices": None,
    "attn_rotary_emb": None,  # older Bamba configs: the rotated dims (transformers ignores it; checked against)
    "mamba_n_heads": 128,
    "mamba_d_head": "auto",
    "mamba_n_groups": 1,
    "mamba_d_state": 256,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_chunk_size": 256,
    "mamba_conv_bias": True,
    "mamba_proj_bias": False,
    "time_step_limit": (0.0, float("inf")),
    "z_loss_coefficient": 0.0,
    "rope_parameters": None,
    "rope_theta": 10000.0,  # transformers 4.x configs keep the base at the top level
}

OPTIONS = (
    Option("hidden_act", lambda v: v in ("silu", "swish"), "Bamba's Mamba-2 mixer and SwiGLU are computed with silu"),
    Option(
        "time_step_limit",
        _no_step_limit,
        "zoo's mamba2 does not clamp the step size (transformers' recurrent step does not either)",
    ),
    Option(
        "z_loss_coefficient",
        lambda v: not v,
        "transformers adds z_loss_coefficient * mean(logsumexp(logits)^2) to the training loss; zoo's LM loss has "
        "no z-loss term",
    ),
    Option(
        "mamba_d_head",
        lambda v: v == "auto" or (isinstance(v, int) and v >= 1),
        "mamba_d_head is 'auto' or a positive integer",
    ),
    *ROPE_OPTIONS,
)


def _sizes(config: dict[str, Any]) -> tuple[int, int]:
    """(attention head width, Mamba-2 head width) as BambaAttention and BambaMixer take them."""
    E, heads, kv = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    if heads % kv:
        raise HFImportError(f"num_attention_heads={heads} must be a multiple of num_key_value_heads={kv}")
    inner, n, groups = config["mamba_expand"] * E, config["mamba_n_heads"], config["mamba_n_groups"]
    d_head = inner // n if config["mamba_d_head"] == "auto" else config["mamba_d_head"]
    if d_head * n != inner or n % groups:
        raise HFImportError(
            f"mamba_n_heads={n}, mamba_d_head={config['mamba_d_head']!r}, mamba_n_groups={groups}: the heads must "
            f"split mamba_expand * hidden_size ({inner}) and be a multiple of the groups"
        )
    return config["head_dim"] or E // heads, d_head


def _rope(config: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """The attention layers' rope: BambaConfig replaces a top-level partial_rotary_factor by 0.5, and
    transformers rotates the first int(head_dim * factor) dims of each head (rotate_half)."""
    params = scaling_parameters(config)
    fraction = float(params.get("partial_rotary_factor") or 0.5)
    rotated = hf_rotary_dims(head_dim, fraction)
    said = config["attn_rotary_emb"]
    if said is not None and said != rotated:
        raise HFImportError(
            f"attn_rotary_emb={said}, but transformers ignores it and rotates {rotated} of the {head_dim} head dims "
            "(partial_rotary_factor 0.5 unless rope_parameters says otherwise): which one the weights were trained "
            "with is unclear"
        )
    return {**rope_spec(config, params), "rotary_fraction": rotary_fraction(rotated, head_dim, fraction)}


def _pad(config: dict[str, Any]) -> int | None:
    """``nn.Embedding(vocab_size, hidden_size, padding_idx=pad_token_id)``: a negative id counts from the end."""
    pad, vocab = config["pad_token_id"], config["vocab_size"]
    if pad is not None and not -vocab <= pad < vocab:
        raise HFImportError(f"pad_token_id={pad} is not a row of the {vocab}-token embedding (nn.Embedding refuses it)")
    return None if pad is None else pad % vocab


def bamba_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    """The zoo recipe of a Bamba config: Mamba-2 and SwiGLU layers, with GQA in the attention layers."""
    E, n = config["hidden_size"], config["num_hidden_layers"]
    head_dim, d_head = _sizes(config)
    pad = _pad(config)
    layers = []
    indices = sorted(i for i in range(n) if i in (config["attn_layer_indices"] or ()))  # as layers_block_type
    if indices:
        attention = {
            "type": "gqa",
            "num_heads": config["num_attention_heads"],
            "num_kv_heads": config["num_key_value_heads"],
            **({"head_dim": head_dim} if head_dim != E // config["num_attention_heads"] else {}),
            "bias": bool(config["attention_bias"]),
            "dropout": float(config["attention_dropout"] or 0.0),
            "rotary": _rope(config, head_dim),
        }
        layers.append({"select": indices, "attention": attention})
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "d_model": E,
        "num_layers": n,
        "max_len": min(config["max_position_embeddings"], MAX_POSITIONS),
        "pad_token_id": pad,
        "norm_position": "pre",
        "embedding": {"type": "token", "padding_idx": pad},
        "attention": {
            "type": "mamba2",
            "head_dim": d_head,
            "expand": config["mamba_expand"],
            "num_groups": config["mamba_n_groups"],
            "state_size": config["mamba_d_state"],
            "conv_kernel": config["mamba_d_conv"],
            "chunk_size": config["mamba_chunk_size"],
            "bias": bool(config["mamba_proj_bias"]),
            "conv_bias": bool(config["mamba_conv_bias"]),
            "norm_eps": config["rms_norm_eps"],
        },
        "positional": {"type": "none"},
        "norm": {"type": "rmsnorm", "eps": config["rms_norm_eps"]},
        "ffn": {"type": "swiglu", "hidden": config["intermediate_size"], "bias": bool(config["mlp_bias"])},
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
        "layers": layers,
    }


def _attention(recipe: Any) -> tuple[list[int], Any]:
    """The attention layers of a recipe, and the first one's attention (None: none)."""
    plan = recipe.layer_plan("decoder")
    indices = [i for i, p in enumerate(plan) if p["attention"][0].type != "mamba2"]
    return indices, plan[indices[0]]["attention"][0] if indices else None


def bamba_config(recipe: Any, weights: Any) -> dict[str, Any]:
    indices, attention = _attention(recipe)
    mixer, E = recipe.attention, recipe.d_model
    said = resolved(attention, E) if attention is not None else {"num_heads": 1, "num_kv_heads": 1, "head_dim": E}
    rotary = getattr(attention, "rotary", None)  # a layer without its own rope is not Bamba's (``_fits`` says so)
    rope = {"rope_type": "default", "rope_theta": 10000.0}
    if getattr(rotary, "type", None) == "rope":
        rope = hf_partial_rope(rotary)
    return {
        "vocab_size": recipe.vocab_size,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "hidden_size": E,
        "intermediate_size": recipe.ffn.hidden,
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": said["num_heads"],
        "num_key_value_heads": said["num_kv_heads"],
        **({"head_dim": said["head_dim"]} if said["head_dim"] != E // said["num_heads"] else {}),
        "hidden_act": "silu",
        "rms_norm_eps": recipe.norm.eps,
        "max_position_embeddings": recipe.max_len,
        "attention_dropout": said.get("dropout", 0.0),
        "attention_bias": bool(said.get("bias", False)),
        "mlp_bias": recipe.ffn.bias,
        "attn_layer_indices": indices,
        "mamba_n_heads": mixer.expand * E // mixer.head_dim,
        "mamba_d_head": mixer.head_dim,
        "mamba_n_groups": mixer.num_groups,
        "mamba_d_state": mixer.state_size,
        "mamba_d_conv": mixer.conv_kernel,
        "mamba_expand": mixer.expand,
        "mamba_chunk_size": mixer.chunk_size,
        "mamba_conv_bias": mixer.conv_bias,
        "mamba_proj_bias": mixer.bias,
        "time_step_limit": [0.0, float("inf")],
        "z_loss_coefficient": 0.0,
        "rope_parameters": rope,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


def _fits(recipe: Any) -> str | None:
    """A requirement: the recipe is exactly what ``bamba_recipe`` makes of its own Bamba config, layer by layer
    (names the first component that differs and how)."""
    from zoo.recipe import load_recipe

    if recipe.architecture != "decoder" or getattr(recipe.attention, "type", None) != "mamba2":
        return "a Bamba stack is a decoder whose base mixer is mamba2"
    if getattr(recipe.ffn, "type", None) != "swiglu" or recipe.ffn.hidden is None:
        return "ffn is a swiglu with its hidden width given (Bamba's MLP)"
    indices, attention = _attention(recipe)
    if attention is not None and resolved(attention, recipe.d_model).get("type") != "gqa":
        return f"layer {indices[0]}'s attention is {attention.type}; Bamba's attention layers are GQA"
    try:
        config = {**DEFAULTS, **bamba_config(recipe, {})}
        expected = load_recipe({"name": recipe.name, **bamba_recipe(config, "BambaForCausalLM", None)})
    except (ValueError, HFImportError) as exc:
        return str(exc)
    return differences(recipe, expected, "Bamba", top=(*TOP, "pad_token_id", "dropout"))


BAMBA = Family(
    name="bamba",
    model_type="bamba",
    classes=("BambaForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=("lm_head.weight",),
    requirements={"layers": _fits, "positional": scaling_fits},
    recipe=bamba_recipe,
    config=bamba_config,
    hf_class=lambda recipe: "BambaForCausalLM",
    recipes=("bamba-9b",),
    unread={
        "num_logits_to_keep": "how many prompt positions transformers' generate computes logits for; the logits it "
        "computes are the same",
        "partial_rotary_factor": "BambaConfig replaces a top-level partial_rotary_factor by 0.5 (rope_parameters' "
        "own is read)",
        "use_mamba_kernels": "which implementation older transformers ran (no effect now): the same function",
        "time_step_min": "older configs: the range of the initial dt_bias; imported weights replace it",
        "time_step_max": "older configs: the range of the initial dt_bias; imported weights replace it",
        "time_step_floor": "older configs: the floor of the initial step sizes; imported weights replace it",
    },
)
