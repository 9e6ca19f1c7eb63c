"""Gemma 2 (``Gemma2ForCausalLM``): Gemma with sandwich norms, scores scaled by ``query_pre_attn_scalar ** -0.5``
and soft-capped, logits soft-capped, and local (sliding) layers alternating with global ones, local first; one rope
for all layers. Its activation key is ``hidden_activation``, whose ``gelu`` is the exact GELU."""

from __future__ import annotations

from dataclasses import replace

from .gemma import GEMMA
from .layer_kinds import local_global_layers
from .rows import ACTIVATION
from .rows_gemma import GATED_FFN, SANDWICH_RULES, SCALE, capped, renamed
from .table import Fixed, Key

GEMMA2 = GEMMA.derive(
    "gemma2",
    classes=("Gemma2ForCausalLM",),
    rules=SANDWICH_RULES,
    recipes=("gemma-2-2b",),
    drop=("hidden_act", "ffn.approximate", "layers"),  # Gemma's activation key and its legacy gelu; one layer kind
    rows=(
        Fixed("block.norm_position", "sandwich"),
        renamed(GATED_FFN, hidden_activation="hidden_act"),
        replace(ACTIVATION, key="hidden_activation"),
        SCALE,
        Key("attn_logit_softcapping", "attention.softcap", 50.0, read=capped),
        Key("final_logit_softcapping", "head.softcap", 30.0, read=capped),
        *local_global_layers("Gemma 2", 2),  # every other layer global, from the second
    ),
    defaults={"hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8}
    | {"num_key_value_heads": 4, "hidden_activation": "gelu_pytorch_tanh"},
)
