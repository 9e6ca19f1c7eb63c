"""OLMo (``OlmoForCausalLM``, AI2's first OLMo): Llama's network with LayerNorms that learn nothing (no scale,
no shift, eps 1e-5: zoo's layernorm with ``affine: false``) and an MLP without biases; ``clip_qkv`` clamps the
projected queries, keys and values (OLMo-7B-0424: 8.0), zoo's attention ``clip_qkv``.
"""

from __future__ import annotations

from .llama import LLAMA
from .rows import heads
from .table import Fixed, Key

OLMO = LLAMA.derive(
    "olmo",
    classes=("OlmoForCausalLM",),
    recipes=("olmo-1b",),
    drop=("rms_norm_eps", "norm.type", "mlp_bias", "pretraining_tp", "sliding_window"),
    rows=(
        heads(head_dim=False),
        Fixed("norm.type", "layernorm"),
        Fixed("norm.affine", False),
        Fixed("norm.eps", 1e-5),
        Fixed("ffn.bias", False),
        Key("clip_qkv", "attention.clip_qkv", None),
    ),
    defaults={"vocab_size": 50304, "pad_token_id": 1},
)
