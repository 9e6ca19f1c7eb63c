"""gpt-oss (``GptOssForCausalLM``): Llama's stack with biased projections, a learned sink per query head, sliding
layers from ``layer_types`` and biased experts: a biased router whose softmax over the top-k logits weights them, and
a clamped SwiGLU, ``min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, -limit, limit) + 1)``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import windows
from ._moe import BLOCK, LAYER, moe_rules, router_rows
from .llama import COMMON, IGNORED, LLAMA
from .mapping import Rule
from .rows import ROPE, stacked_experts
from .table import Computed, Fixed, Key, Refused, Require, Unread

RULES = (
    *COMMON,
    Rule(f"{LAYER}.self_attn.sinks", f"{BLOCK}.attention.sinks"),
    *moe_rules(router="router", kinds=("weight", "bias")),
)
YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False}
YARN["original_max_position_embeddings"] = 4096  # GptOssConfig's rope without rope_parameters
# Experts stacked on disk: gate_up_proj (X, E, 2H, gate and up columns interleaved), down_proj (X, H, E), biases
unfuse, fuse = stacked_experts(
    "mlp", "experts.gate_up_proj", "experts.down_proj", inputs_first=True, interleaved=True, biases=True
)


def _windows(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    # GptOssConfig has no use_sliding_window: its layer_types (by default sliding, full, sliding, ...) decide.
    n = config["num_hidden_layers"]
    types = config["layer_types"] or [windows.LAYER_TYPES[(i + 1) % 2] for i in range(n)]
    keys = {**config, "use_sliding_window": True, "max_window_layers": n, "layer_types": types}
    return windows.with_sliding_layers(recipe, *windows.sliding_layers(keys))


def _rope(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    # A config without rope_parameters or rope_scaling has GptOssConfig's YaRN, at its rope_theta.
    if config["rope_parameters"] is None and config["rope_scaling"] is None:
        config = {**config, "rope_parameters": {**YARN, "rope_theta": config["rope_theta"]}}
    return ROPE.read(config, recipe)


def _clamped(recipe: Any) -> str | None:
    expert = recipe.ffn.expert
    return None if expert.hidden and expert.limit else "ffn.expert needs its hidden width and a limit (it clamps)"


WINDOW_KEYS = ("sliding_window", "layer_types")  # of Qwen2's: GptOssConfig has no use_sliding_window
WINDOWS = Computed(
    "sliding layers",
    keys={"sliding_window": 128, "layer_types": None},
    paths=("attention.window", "layers"),
    read=_windows,
    write=lambda recipe, weights: {k: v for k, v in windows.hf_sliding_layers(recipe).items() if k in WINDOW_KEYS},
    requires={"layers": windows.only_windows_differ},
    last=True,  # its layer overrides copy the attention as the other rows made it
)

GPT_OSS = LLAMA.derive(
    "gpt_oss",
    classes=("GptOssForCausalLM",),
    rules=RULES,
    ignored=IGNORED,
    layout=unfuse,
    hf_layout=fuse,
    recipes=("gpt-oss-20b", "gpt-oss-120b"),
    drop=("mlp_bias", "pretraining_tp", "sliding_window", "gated ffn", "hidden_act", "layers"),
    rows=(
        replace(ROPE, read=_rope),
        Fixed("attention.sinks", True),
        WINDOWS,
        *windows.WINDOW_OPTIONS,
        *router_rows("num_local_experts", 128, 4),
        Fixed("ffn.router_bias", True),
        Fixed("ffn.expert.type", "swiglu"),
        Fixed("ffn.expert.bias", True),
        Fixed("ffn.expert.up_shift", 1.0),  # GptOssExperts' (up + 1)
        Key("intermediate_size", "ffn.expert.hidden", 2880),
        Key("swiglu_alpha", "ffn.expert.alpha", 1.702),
        Key("swiglu_limit", "ffn.expert.limit", 7.0),
        Require("ffn.expert", _clamped),
        Refused("swiglu_limit", lambda v: v is not None, "GptOssExperts clamp by it; without one they cannot run"),
        Unread("hidden_act", "GptOssExperts ignore it: their gate is x * sigmoid(swiglu_alpha * x), clamped"),
        Refused(
            "quantization_config",
            lambda v: v is None,
            "the published experts are MXFP4 blocks and scales (gate_up_proj_blocks, ..._scales); zoo reads plain "
            "tensors: dequantise them first (transformers: Mxfp4Config(dequantize=True), then save_pretrained)",
        ),
    ),
    defaults={"vocab_size": 201088, "hidden_size": 2880, "num_hidden_layers": 36, "num_attention_heads": 64}
    | {"num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5}
    | {"attention_bias": True, "rope_theta": 150000.0},
)
