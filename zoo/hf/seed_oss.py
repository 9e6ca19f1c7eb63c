"""Seed-OSS (``SeedOssForCausalLM``, ByteDance Seed's open models): Llama's network with one bias flag for the
query, key and value projections (``attention_bias``, on in the published models) and another for the output
projection (``attention_out_bias``).
"""

from __future__ import annotations

from .llama import LLAMA
from .rows import biases
from .table import Unread

SEED_OSS = LLAMA.derive(
    "seed_oss",
    classes=("SeedOssForCausalLM",),
    recipes=("seed-oss-36b",),
    drop=("attention_bias", "sliding_window"),
    rows=(
        biases("attention_bias", "attention_out_bias"),
        Unread("residual_dropout", "dropout on each sub-layer's output while training; off in eval"),
    ),
    defaults={
        "vocab_size": 155136,
        "intermediate_size": 27648,
        "num_hidden_layers": 64,
        "num_attention_heads": 80,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 524288,
        "pad_token_id": 1,
        "attention_dropout": 0.1,
        "attention_bias": True,
    },
)
