"""Helium (``HeliumForCausalLM``, Kyutai's Helium 1): Llama's network with RoPE on adjacent pairs of dims
(GPT-J's interleaved layout), one ``attention_bias`` for the query, key and value projections (never the output
one), and heads that make up ``hidden_size`` exactly (its output projection is hidden_size -> hidden_size).
"""

from __future__ import annotations

from .llama import LLAMA
from .mapping import default_head_dim
from .rows import biases, rope
from .table import Require

HELIUM = LLAMA.derive(
    "helium",
    classes=("HeliumForCausalLM",),
    recipes=("helium-1-2b",),
    drop=("pretraining_tp", "sliding_window"),
    rows=(rope(interleaved=True), biases("attention_bias", False), Require("attention.head_dim", default_head_dim)),
    defaults={
        "vocab_size": 48000,
        "hidden_size": 2560,
        "intermediate_size": 7040,
        "num_hidden_layers": 24,
        "num_attention_heads": 20,
        "num_key_value_heads": 20,
        "head_dim": 128,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-8,
        "rope_theta": 100000.0,
        "pad_token_id": 3,
    },
)
