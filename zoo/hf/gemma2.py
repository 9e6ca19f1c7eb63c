"""Gemma 2 (``Gemma2ForCausalLM``): Gemma with sandwich norms, scores scaled by ``query_pre_attn_scalar ** -0.5``
and soft-capped at ``attn_logit_softcapping``, logits soft-capped at ``final_logit_softcapping``, and local
(sliding-window) layers alternating with global ones, local first (the local ones, on a tie, are ``layers:``
overrides); one rope for all layers. Its activation key is ``hidden_activation``, whose ``gelu`` is the exact GELU.
"""

from __future__ import annotations

from dataclasses import replace

from . import layer_kinds as kinds
from .gemma import GATED_FFN, GEMMA, SANDWICH_RULES, SCALE, renamed
from .rows import ACTIVATION
from .table import Computed, Fixed, Key


def _capped(value: float | None) -> float | None:
    return None if value is None else float(value)


LAYERS = Computed(
    "local and global layers",
    keys={"sliding_window": 4096, "layer_types": None},
    paths=("attention.window", "layers"),
    read=lambda config, recipe: kinds.local_global(  # every other layer global, from the second
        kinds.gemma_layer_types(config, pattern=2),
        recipe["attention"],
        config["sliding_window"],
        dict.fromkeys((kinds.LOCAL, kinds.GLOBAL), recipe["positional"]),
    ),
    write=lambda recipe, weights: kinds.hf_gemma_layers(recipe),
    requires={"layers": lambda recipe: kinds.gemma_layers_fit(recipe, one_rope=True)},
    last=True,  # its overrides copy the attention as the other rows made it
)

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
        Key("attn_logit_softcapping", "attention.softcap", 50.0, read=_capped),
        Key("final_logit_softcapping", "head.softcap", 30.0, read=_capped),
        LAYERS,
        kinds.layer_types_option("Gemma 2"),
    ),
    defaults={"hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8}
    | {"num_key_value_heads": 4, "hidden_activation": "gelu_pytorch_tanh"},
)
