"""Llama 4's text model (``Llama4ForCausalLM``): Llama's stack with RoPE on adjacent pairs and, as ``no_rope_layers``
and ``layer_types`` say, chunked RoPE layers with a weightless QK-norm after RoPE, NoPE layers with a temperature, and
MoE layers (sigmoid-weighted inputs, a shared expert) among dense ones; the experts are fused on disk."""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from . import _moe as moe
from .layer_kinds import rope_every
from .llama import COMMON, IGNORED, LLAMA
from .rows import GATED, hidden_act, layer_attentions, per_layer_attention, rope, stacked_experts, uses_rope
from .table import Computed, Fixed, Refused

FF = f"{moe.LAYER}.feed_forward"
RULES = (*COMMON, *moe.swiglu_rules(FF, moe.FFN), *moe.moe_rules(FF, router="router", shared="shared_expert"))
ROPE_FIELDS = ("qk_norm", "qk_norm_position", "chunk_size")
NOPE_FIELDS = ("rotary", "temperature_floor_scale", "temperature_scale")
# on disk: feed_forward.experts.gate_up_proj (X, E, 2H: gate then up) and down_proj (X, H, E)
LAYOUT, HF_LAYOUT = stacked_experts("feed_forward", "experts.gate_up_proj", "experts.down_proj", inputs_first=True)


def read_layers(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """Each layer's attention and FFN, as ``Llama4TextConfig.__post_init__`` fills the lists a config omits."""
    n, chunk = config["num_hidden_layers"], config["attention_chunk_size"]
    rope_on = config["no_rope_layers"] or rope_every(config, {})
    types = config["layer_types"] or ["chunked_attention" if r and chunk else "full_attention" for r in rope_on]
    if len(rope_on) < n or len(types) < n or ("chunked_attention" in types and chunk is None):
        raise HFImportError("no_rope_layers and layer_types need an entry per layer, chunks an attention_chunk_size")
    norm = {"qk_norm": {"type": "rmsnorm", "affine": False, "eps": config["rms_norm_eps"]}}
    norm = {**norm, "qk_norm_position": "after_rope"} if config["use_qk_norm"] else {}
    heat = {"temperature_floor_scale": config["floor_scale"], "temperature_scale": config["attn_scale"]}
    heat = heat if config["attn_temperature_tuning"] else {}
    nope = {"rotary": {"type": "none"}, **heat}
    chunked = {"chunk_size": chunk}
    changes = [(norm if rope_on[i] else nope) | (chunked if types[i] == "chunked_attention" else {}) for i in range(n)]
    out = per_layer_attention(recipe, changes)
    step, sparse = config["interleave_moe_layer_step"], config["moe_layers"]
    dense = [i for i in range(n) if i not in (range(step - 1, n, step) if sparse is None else sparse)]
    if len(dense) == n:
        raise HFImportError("moe_layers names no layer: zoo imports Llama 4 models with a mixture of experts")
    ffn = {**GATED[config["hidden_act"]], "hidden": config["intermediate_size_mlp"]}
    return {**out, "layers": [*out.pop("layers", []), *moe.dense_override(dense, ffn, n)]}


def write_layers(recipe: Any, weights: Any) -> dict[str, Any]:
    plan = recipe.layer_plan("decoder")
    attentions = [placed["attention"][0] for placed in plan]
    rope_on = [uses_rope(a) for a in attentions]
    norms = [a for a, r in zip(attentions, rope_on, strict=True) if r and a.qk_norm is not None]
    heats = [a for a, r in zip(attentions, rope_on, strict=True) if not r and a.temperature_floor_scale]
    chunks = [a.chunk_size for a in attentions if a.chunk_size]
    width = moe.weight_rows(weights, recipe, False, "experts.0.up_proj.weight")
    return {
        "no_rope_layers": [int(r) for r in rope_on],
        "layer_types": ["chunked_attention" if a.chunk_size else "full_attention" for a in attentions],
        "attention_chunk_size": chunks[0] if chunks else None,
        "use_qk_norm": bool(norms),
        "attn_temperature_tuning": bool(heats),
        "floor_scale": heats[0].temperature_floor_scale if heats else 8192,
        "attn_scale": heats[0].temperature_scale if heats else 0.1,
        "moe_layers": [i for i, placed in enumerate(plan) if placed["ffn"][1] == "ffn"],
        "intermediate_size_mlp": moe.weight_rows(weights, recipe, True, "up_proj.weight") or 2 * width,
    }


def layers_fit(recipe: Any) -> str | None:
    """Overrides change only the fields a kind of layer sets (or swap in the dense FFN), and each kind sets them
    alike: a weightless RMSNorm of ``norm.eps`` after RoPE on RoPE layers, one temperature on NoPE layers."""
    blank = dict.fromkeys(ROPE_FIELDS + NOPE_FIELDS)
    base = recipe.attention.model_copy(update=blank)
    for j, o in enumerate(recipe.layers):
        if o.norm is not None or (o.attention is not None and (o.ffn or o.attention.model_copy(update=blank) != base)):
            return f"layers.{j}: a Llama 4 layer differs only in its {', '.join(ROPE_FIELDS + NOPE_FIELDS)}, or its FFN"
    want = {"type": "rmsnorm", "eps": recipe.norm.eps, "affine": False, "offset": 0.0}
    seen: dict[bool, set] = {True: set(), False: set()}
    attentions = layer_attentions(recipe)
    for a in attentions:
        rope_on, norm, heat = uses_rope(a), a.qk_norm is not None, (a.temperature_floor_scale, a.temperature_scale)
        if a.rotary is not None and rope_on:
            return "a Llama 4 layer rotates by the stack's rope (rotary unset) or not at all (rotary: {type: none})"
        if norm and (a.qk_norm.model_dump() != want or a.qk_norm_position != "after_rope" or not rope_on):
            return "Llama 4's qk norm is a weightless rmsnorm of norm.eps after rope, on RoPE layers only"
        if heat[0] and rope_on:
            return "Llama 4 tunes the temperature of its NoPE layers only"
        seen[rope_on].add((norm, heat))
    if len({a.chunk_size for a in attentions} - {None}) > 1 or len(seen[True]) > 1 or len(seen[False]) > 1:
        return "Llama 4's RoPE layers share one qk norm, its NoPE layers one temperature, its chunks one size"
    dense = [o for o in recipe.layers if o.attention is None]
    return moe.only_dense_ffns_differ(recipe.model_copy(update={"layers": dense}))


def read_experts(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    expert = {**GATED[config["hidden_act"]], "hidden": config["intermediate_size"]}
    return {"ffn.expert": expert, "ffn.shared_expert": expert}


def experts_fit(recipe: Any) -> str | None:
    """Bias-free gated experts, and a shared expert just like them (``Llama4TextMLP`` of ``intermediate_size``)."""
    if recipe.ffn.shared_expert != recipe.ffn.expert:
        return "ffn.shared_expert must equal ffn.expert (Llama 4's shared expert is one more expert, unweighted)"
    return moe.fits_experts(recipe)


EXPERTS = Computed(
    "experts",
    keys={"hidden_act": "silu", "intermediate_size": 8192},
    paths=("ffn.expert", "ffn.shared_expert"),
    read=read_experts,
    write=lambda recipe, weights: {
        "hidden_act": hidden_act(recipe.ffn.expert),
        "intermediate_size": moe.weight_rows(weights, recipe, False, "experts.0.up_proj.weight"),
    },
    requires={"ffn.experts": experts_fit},
)

LAYERS = Computed(
    "layers",
    keys={"no_rope_layers": None, "no_rope_layer_interval": 4, "layer_types": None, "attention_chunk_size": 8192}
    | {"use_qk_norm": True, "attn_temperature_tuning": True, "floor_scale": 8192, "attn_scale": 0.1}
    | {"moe_layers": None, "interleave_moe_layer_step": 1, "intermediate_size_mlp": 16384},
    paths=(*(f"attention.{f}" for f in ROPE_FIELDS + NOPE_FIELDS), "layers"),
    read=read_layers,
    write=write_layers,
    requires={"layers": layers_fit},
    legacy=("no_rope_layer_interval", "interleave_moe_layer_step"),  # no_rope_layers and moe_layers say it
    last=True,  # its overrides copy the attention as the other rows made it
)

LLAMA4_TEXT = LLAMA.derive(
    "llama4_text",
    classes=("Llama4ForCausalLM",),
    rules=RULES,
    ignored=IGNORED,
    layout=LAYOUT,
    hf_layout=HF_LAYOUT,
    recipes=("llama-4-scout-17b-16e",),
    drop=("mlp_bias", "pretraining_tp", "sliding_window", "gated ffn", "layers"),
    rows=(
        rope(interleaved=True),
        LAYERS,
        *moe.router_rows("num_local_experts", 16, 1),
        Fixed("ffn.scoring", "sigmoid"),
        Fixed("ffn.normalize", False),
        Fixed("ffn.weighted_input", True),
        EXPERTS,
        Refused("router_jitter_noise", lambda v: not v, "zoo's router adds no training noise", export=0.0),
        Refused(
            "layer_types",
            lambda v: v is None or set(v) <= {"full_attention", "chunked_attention"},
            "Llama4TextModel makes masks for full_attention and chunked_attention layers only",
        ),
        moe.ROUTER_LOGITS,
    ),
    defaults={"vocab_size": 202048, "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40}
    | {"num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5}
    | {"rope_theta": 500000.0},
)
