"""A config.json's values checked before any translation reads them: the type each key's default has, and the
range of the sizes and counts that translations loop over or divide by.

A family's translation is arithmetic on config values (``hidden_size // num_attention_heads``, a loop over
``num_hidden_layers``); checked here once, a wrong value is one message naming the key, never a
``ZeroDivisionError``, a string read as a number, or a loop over 10^30 layers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from zoo.limits import (
    MAX_D_MODEL,
    MAX_EXPERTS,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_LAYERS,
    MAX_POSITIONS,
    MAX_VOCAB,
    MAX_WIDTH,
)

_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers", "num_decoder_layers")
_HEADS = (
    "num_attention_heads",
    "n_head",
    "num_heads",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "num_key_value_heads",
)
_WIDTHS = ("hidden_size", "n_embd", "d_model", "n_embed")
_FFN = ("intermediate_size", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim", "moe_intermediate_size", "n_inner")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_num_experts")

RANGES: dict[str, tuple[int, int]] = {
    **dict.fromkeys(_LAYERS, (1, MAX_LAYERS)),
    **dict.fromkeys(_HEADS, (1, MAX_HEADS)),
    **dict.fromkeys(_WIDTHS, (1, MAX_D_MODEL)),
    **dict.fromkeys(_FFN, (1, MAX_WIDTH)),
    **dict.fromkeys(_EXPERTS, (0, MAX_EXPERTS)),  # 0: a dense model (Qwen2-MoE's families say which to use)
    "head_dim": (1, MAX_HEAD_DIM),
    "d_kv": (1, MAX_HEAD_DIM),
    "vocab_size": (1, MAX_VOCAB),
    "max_position_embeddings": (1, MAX_POSITIONS),
    "max_encoder_position_embeddings": (1, MAX_POSITIONS),  # LED's two tables
    "max_decoder_position_embeddings": (1, MAX_POSITIONS),
    "n_positions": (1, MAX_POSITIONS),
    "num_labels": (1, MAX_VOCAB),
}
"""Sizes and counts: integers in ``[low, high]`` (zoo's recipe limits), wherever a config gives them."""

OBJECTS = ("rope_scaling", "rope_parameters", "attn_config", "ffn_config", "id2label", "label2id")
"""Keys that hold a JSON object when given (their default is None, so no default says their type)."""

EITHER = ("sliding_window_pattern", "attention_window")
"""Keys whose type differs by family and checkpoint (EXAONE 4's 'LLLG' where Gemma 3's is 6; LED's one window or
one per layer): each family's translation checks them."""

POSITIVE = ("rope_theta", "rotary_emb_base", "layer_norm_eps", "rms_norm_eps", "layer_norm_epsilon")
"""Floats that must be finite and above 0 (a RoPE base of 0 has no frequencies; an epsilon of 0 divides by 0)."""


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string or number", list: "a list"}.get(
        type(value), "an object" if isinstance(value, Mapping) else type(value).__name__
    )


def _fits(value: Any, default: Any) -> bool:
    """Whether ``value`` has the JSON type of ``default`` (an integer is a number too)."""
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(default, str):  # "auto" where a number may stand (Mamba's time_step_rank, mamba_d_head)
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    if isinstance(default, list | tuple):
        return isinstance(value, list)
    if isinstance(default, Mapping):
        return isinstance(value, Mapping)
    return True


def config_problems(given: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str]:
    """One message per value of ``given`` (config.json as written) of the wrong type or out of its range."""
    problems = []
    for dotted, value in given.items():
        if value is None:
            continue
        default = defaults.get(dotted)
        key = dotted.rpartition(".")[2]  # a nested config's key (CLIP's text_config.layer_norm_eps) as any other
        if key in OBJECTS and not isinstance(value, Mapping):
            problems.append(f"{dotted}={value!r} must be an object (a mapping of names to values), not {_kind(value)}")
            continue
        if default is not None and key not in EITHER and not _fits(value, default):
            problems.append(f"{dotted}={value!r} must be {_kind(default)}, like its default {default!r}")
            continue
        if key in RANGES:
            low, high = RANGES[key]
            each = value if isinstance(default, list) and isinstance(value, list) else [value]  # Swin: one per stage
            wrong = [v for v in each if isinstance(v, bool) or not isinstance(v, int)]
            if wrong or not each:
                problems.append(
                    f"{dotted}={value!r} must be {'integers' if each is value else 'an integer'} from {low} to {high:,}"
                )
            elif any(not low <= v <= high for v in each):
                problems.append(f"{dotted}={value!r} is out of range: zoo builds {low} to {high:,}")
        elif key in POSITIVE:
            number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
            if number is None or not math.isfinite(number) or number <= 0:
                problems.append(f"{dotted}={value!r} must be a finite number above 0")
    return problems
