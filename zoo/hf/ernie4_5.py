"""ERNIE 4.5 dense (``Ernie4_5ForCausalLM``, Baidu): Llama's network with RoPE on adjacent pairs of dims
(interleaved) and one ``use_bias`` for every linear layer of the blocks (q, k, v, o and the MLP's three).
"""

from __future__ import annotations

from typing import Any

from .llama import LLAMA
from .rows import BIAS_FIELDS, rope
from .table import Computed


def one_flag(recipe: Any) -> str | None:
    """A requirement: the four attention projections and the FFN biased alike (ERNIE's one ``use_bias``)."""
    on = {**recipe.attention.biases(), "ffn": recipe.ffn.bias}
    return None if len(set(on.values())) == 1 else f"biases {on} differ; ERNIE 4.5 has one use_bias for all"


USE_BIAS = Computed(
    "biases",
    keys={"use_bias": False},
    paths=(*BIAS_FIELDS, "ffn.bias"),
    read=lambda config, recipe: {"attention.bias": bool(config["use_bias"]), "ffn.bias": bool(config["use_bias"])},
    write=lambda recipe, weights: {"use_bias": recipe.ffn.bias},
    requires={"attention.biases": one_flag},
)

ERNIE4_5 = LLAMA.derive(
    "ernie4_5",
    classes=("Ernie4_5ForCausalLM",),
    recipes=("ernie-4.5-0.3b",),
    drop=("attention_bias", "mlp_bias", "attention_dropout", "pretraining_tp", "sliding_window"),
    rows=(rope(interleaved=True), USE_BIAS),
    defaults={"vocab_size": 103424, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 18}
    | {"num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 128, "max_position_embeddings": 131072}
    | {"rms_norm_eps": 1e-5, "pad_token_id": 0, "tie_word_embeddings": True, "rope_theta": 500000.0},
)
