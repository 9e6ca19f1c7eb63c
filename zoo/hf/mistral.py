"""Mistral (``MistralForCausalLM``): Llama's network (RMSNorm pre-norm decoder, RoPE, grouped-query attention,
SwiGLU, no biases) with sliding-window attention: every query sees the ``sliding_window`` most recent keys,
itself included (zoo's attention ``window``; ``sliding_window: null`` attends to every key).
"""

from __future__ import annotations

from .llama import LLAMA
from .table import Fixed, Key

MISTRAL = LLAMA.derive(
    "mistral",
    classes=("MistralForCausalLM",),
    recipes=("mistral-7b-v0.1",),
    drop=("attention_bias", "mlp_bias", "pretraining_tp", "sliding_window"),
    rows=(
        Fixed("attention.bias", False),  # Mistral's projections never have biases
        Fixed("ffn.bias", False),
        Key("sliding_window", "attention.window", 4096),
    ),
    defaults={"intermediate_size": 14336, "num_key_value_heads": 8, "max_position_embeddings": 4096 * 32},
)
