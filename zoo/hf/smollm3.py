"""SmolLM3 (``SmolLM3ForCausalLM``): Llama's network in which every ``no_rope_layer_interval``-th layer (every 4th)
has no rotary embedding at all (a NoPE layer: zoo's attention ``rotary: {type: none}``), as ``no_rope_layers``
lists (1: rope, 0: none); ``layer_types`` may make layers slide over ``sliding_window`` keys.
"""

from __future__ import annotations

from typing import Any

from .llama import LLAMA
from .rows import heads, layer_attentions, only_attention_differs, per_layer_attention, uses_rope
from .table import Computed

NONE = {"type": "none"}


def read_layers(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """As ``SmolLM3Config.__post_init__`` fills ``no_rope_layers`` and ``layer_types`` when a config omits them."""
    n, interval = config["num_hidden_layers"], config["no_rope_layer_interval"]
    rope = config["no_rope_layers"] or [int((i + 1) % interval != 0) for i in range(n)]
    window = config["sliding_window"] if config["use_sliding_window"] else None
    types = config["layer_types"] or [
        "sliding_attention" if window is not None and not rope[i] else "full_attention" for i in range(n)
    ]
    changes = [
        {**({} if rope[i] else {"rotary": NONE}), **({"window": window} if types[i] == "sliding_attention" else {})}
        for i in range(n)
    ]
    return per_layer_attention(recipe, changes)


def write_layers(recipe: Any, weights: Any) -> dict[str, Any]:
    attentions = layer_attentions(recipe)
    window = next((a.window for a in attentions if a.window is not None), None)
    return {
        "use_sliding_window": window is not None,
        "sliding_window": window,
        "no_rope_layers": [int(uses_rope(a)) for a in attentions],
        "layer_types": ["full_attention" if a.window is None else "sliding_attention" for a in attentions],
    }


SMOLLM3 = LLAMA.derive(
    "smollm3",
    classes=("SmolLM3ForCausalLM",),
    recipes=("smollm3-3b",),
    drop=("pretraining_tp", "sliding_window", "layers"),
    rows=(
        heads(head_dim=False),
        Computed(
            "layers",
            keys={
                "use_sliding_window": False,
                "sliding_window": None,
                "no_rope_layers": None,
                "no_rope_layer_interval": 4,
                "layer_types": None,
            },
            paths=("attention.window", "attention.rotary", "layers"),
            read=read_layers,
            write=write_layers,
            requires={"layers": only_attention_differs("window", "rotary")},
            legacy=("no_rope_layer_interval",),  # no_rope_layers, written, says it per layer
            last=True,
        ),
    ),
    defaults={
        "vocab_size": 128256,
        "hidden_size": 2048,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "max_position_embeddings": 32768,
        "pad_token_id": 128004,
        "tie_word_embeddings": True,
        "rope_theta": 2000000.0,
    },
)
