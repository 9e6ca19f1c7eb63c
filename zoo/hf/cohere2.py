"""Cohere2 (``Cohere2ForCausalLM``, Command R7B): Cohere's network in which ``sliding_attention`` layers slide over
``sliding_window`` keys with RoPE and ``full_attention`` layers see every key without positions (NoPE).
"""

from __future__ import annotations

from typing import Any

from .cohere import COHERE
from .rows import layer_attentions, only_attention_differs, per_layer_attention, uses_rope
from .table import Computed, Unread


def read_layers(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """As ``Cohere2Config`` and ``Cohere2Attention``: a layer rotates only when it slides."""
    n, window = config["num_hidden_layers"], config["sliding_window"]
    types = config["layer_types"] or [
        "sliding_attention" if (i + 1) % config["sliding_window_pattern"] else "full_attention" for i in range(n)
    ]
    slides = [t == "sliding_attention" and window is not None for t in types]
    return per_layer_attention(recipe, [{"window": window} if s else {"rotary": {"type": "none"}} for s in slides])


def rotates_where_it_slides(recipe: Any) -> str | None:
    """A requirement: the layers that slide share one window and rotate; the others are NoPE."""
    attentions = layer_attentions(recipe)
    if len({a.window for a in attentions} - {None}) > 1:
        return "the layers' windows differ; a sliding_window is one value"
    wrong = [i for i, a in enumerate(attentions) if (a.window is not None) != uses_rope(a)]
    return f"layers {wrong}: Cohere2 rotates exactly the layers that slide" if wrong else None


def write_layers(recipe: Any, weights: Any) -> dict[str, Any]:
    attentions = layer_attentions(recipe)
    return {
        "sliding_window": next((a.window for a in attentions if a.window is not None), None),
        "layer_types": ["sliding_attention" if a.window is not None else "full_attention" for a in attentions],
    }


COHERE2 = COHERE.derive(
    "cohere2",
    classes=("Cohere2ForCausalLM",),
    recipes=("command-r7b",),
    drop=("use_qk_norm", "layers"),
    rows=(
        Unread("head_dim", "Cohere2Config sets it to hidden_size / num_attention_heads whatever config.json says"),
        Computed(
            "layers",
            keys={"sliding_window": 4096, "layer_types": None, "sliding_window_pattern": 4},
            paths=("attention.window", "attention.rotary", "layers"),
            read=read_layers,
            write=write_layers,
            requires={
                "layers": only_attention_differs("window", "rotary"),
                "attention.rotary": rotates_where_it_slides,
            },
            legacy=("sliding_window_pattern",),  # older configs' pattern; layer_types, written, says it per layer
            last=True,
        ),
    ),
    defaults={"rope_theta": 10000.0},
)
