"""Qwen3 (``Qwen3ForCausalLM``): Qwen2's network with QK-norm, an RMSNorm over each head's ``head_dim``
features of the queries and of the keys (before RoPE), one ``attention_bias`` for all four projections (off
in the published models) and ``head_dim`` 128 by default. Sliding-window layers as in Qwen2.
"""

from __future__ import annotations

from .llama import LLAMA_RULES
from .mapping import Rule
from .qwen2 import QWEN2
from .rows import ONE_BIAS, qk_norm

QWEN3_RULES = (
    *LLAMA_RULES,
    Rule("model.layers.{i}.self_attn.q_norm.weight", "blocks.{i}.attention.q_norm.weight"),
    Rule("model.layers.{i}.self_attn.k_norm.weight", "blocks.{i}.attention.k_norm.weight"),
)


QK_NORM = qk_norm("head")

QWEN3 = QWEN2.derive(
    "qwen3",
    classes=("Qwen3ForCausalLM",),
    rules=QWEN3_RULES,
    recipes=("qwen3-0.6b",),
    rows=(ONE_BIAS, QK_NORM),
    defaults={"head_dim": 128},
)
