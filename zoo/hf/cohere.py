"""Cohere (``CohereForCausalLM``, Command R) and Cohere2 (``Cohere2ForCausalLM``, Command R7B): Llama's attention
and SwiGLU read the same normed input in parallel (one LayerNorm without bias per block: zoo's parallel block with
``shared_norm``), RoPE on adjacent pairs, and logits times ``logit_scale`` (zoo's head divides by its inverse).
Cohere2's ``sliding_attention`` layers slide over ``sliding_window`` keys with RoPE; its ``full_attention`` layers
see every key without positions (NoPE).
"""

from __future__ import annotations

from typing import Any

from .llama import LLAMA
from .rows import heads, layer_attentions, only_attention_differs, per_layer_attention, rope, uses_rope
from .table import Computed, Fixed, Key, Refused, Unread

COHERE = LLAMA.derive(
    "cohere",
    classes=("CohereForCausalLM",),
    recipes=("command-r-v01",),
    drop=("rms_norm_eps", "norm.type", "mlp_bias", "pretraining_tp", "sliding_window"),
    rows=(
        heads(head_dim=False),
        rope(interleaved=True),
        Fixed("block.parallel", True),
        Fixed("block.shared_norm", True),
        Fixed("norm.type", "layernorm"),
        Fixed("norm.bias", False),
        Key("layer_norm_eps", "norm.eps", 1e-5),
        Fixed("ffn.bias", False),
        Key("logit_scale", "head.logit_divisor", 0.0625, read=lambda scale: 1 / scale, write=lambda d: 1 / d),
        Refused(
            "use_qk_norm",
            lambda v: not v,
            "Cohere's q/k LayerNorms learn a weight per head (heads x head_dim); zoo's q/k norm shares one",
            export=False,
        ),
    ),
    defaults={
        "vocab_size": 256000,
        "hidden_size": 8192,
        "intermediate_size": 22528,
        "num_hidden_layers": 40,
        "num_attention_heads": 64,
        "max_position_embeddings": 8192,
        "pad_token_id": 0,
        "tie_word_embeddings": True,
        "rope_theta": 500000.0,
    },
)


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
)
