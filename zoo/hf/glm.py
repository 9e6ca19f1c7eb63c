"""GLM-4 (``GlmForCausalLM``, the ``glm`` model type): Llama's network with RoPE on adjacent pairs over the leading
half of each head (``partial_rotary_factor: 0.5``), biases on the query, key and value projections only, and the
MLP's gate and up projections fused into one ``gate_up_proj`` (gate rows, then up). GLM-4-0414: ``glm4.py``.
"""

from __future__ import annotations

from ._common import SPLIT_GATE_UP
from .llama import BLOCK, COMMON, LAYER, LLAMA
from .mapping import Rule
from .rows import biases, rope
from .table import Fixed

GATE_UP = (f"{BLOCK}.ffn.gate_proj.weight", f"{BLOCK}.ffn.up_proj.weight")
FUSED_MLP = (
    Rule(f"{LAYER}.mlp.gate_up_proj.weight", GATE_UP, SPLIT_GATE_UP),
    Rule(f"{LAYER}.mlp.down_proj.weight", f"{BLOCK}.ffn.down_proj.weight"),
)

GLM = LLAMA.derive(
    "glm",
    classes=("GlmForCausalLM",),
    rules=(*COMMON, *FUSED_MLP),
    recipes=("glm-4-9b",),
    drop=("attention_bias", "mlp_bias", "pretraining_tp", "sliding_window", "rope_parameters.partial_rotary_factor"),
    rows=(rope(interleaved=True, partial=True), biases("attention_bias", False), Fixed("ffn.bias", False)),
    defaults={"vocab_size": 151552, "intermediate_size": 13696, "num_hidden_layers": 40, "num_key_value_heads": 2}
    | {"head_dim": 128, "max_position_embeddings": 131072, "rms_norm_eps": 1.5625e-07, "pad_token_id": 151329}
    | {"partial_rotary_factor": 0.5, "attention_bias": True},
)
