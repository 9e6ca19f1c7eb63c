"""StarCoder2 (``Starcoder2ForCausalLM``): Llama's table with biased LayerNorms, one ``use_bias`` for every projection,
a sliding window, a two-layer MLP ``c_proj(gelu_tanh(c_fc(x)))`` and a tied head by default. Llama's heads row reads
and writes the ``head_dim`` that Starcoder2Attention (not Starcoder2Config) reads."""

from __future__ import annotations

from typing import Any

from .llama import ATTENTION, BLOCK, COMMON, LAYER, LLAMA
from .mapping import HF_ACTIVATIONS, activation_option
from .rows import BIAS_FIELDS, plain_mlp
from .rows_neox import flag, layernorm, linear_rules, sublayer_dropout
from .table import Key

MLP_NAMES = ("mlp.c_fc ffn.up_proj", "mlp.c_proj ffn.down_proj")
RULES = (
    COMMON[0],  # the embeddings
    *linear_rules(f"{LAYER}.", f"{BLOCK}.", "input_layernorm attention_norm"),
    *ATTENTION,
    *linear_rules(f"{LAYER}.", f"{BLOCK}.", "post_attention_layernorm ffn_norm", *MLP_NAMES),
    *linear_rules("model.", "", "norm final_norm"),
    COMMON[-1],  # the head, only when untied
)


def one_bias(recipe: Any) -> str | None:
    """A requirement: every projection of attention and MLP biased, or none (StarCoder2's one ``use_bias``)."""
    on = {**{f"attention.{p}": b for p, b in recipe.attention.biases().items()}, "ffn": recipe.ffn.bias}
    if len(set(on.values())) != 1 or recipe.attention.bias != recipe.ffn.bias:
        return f"biases are {on}, need all or none (use_bias)"
    return None


STARCODER2 = LLAMA.derive(
    "starcoder2",
    classes=("Starcoder2ForCausalLM",),
    rules=RULES,
    recipes=("starcoder2-3b",),
    drop=("attention_bias", "mlp_bias", "pretraining_tp", "rms_norm_eps", "sliding_window"),
    rows=(
        *layernorm("norm_epsilon"),
        flag("biases", "use_bias", True, "attention.bias", "ffn.bias", owns=(*BIAS_FIELDS, "ffn.bias"), check=one_bias),
        plain_mlp(acts={**HF_ACTIVATIONS, "gelu_tanh": "gelu_pytorch_tanh"}),  # torch's tanh GELU, as published
        activation_option("hidden_act", "StarCoder2"),
        Key("sliding_window", "attention.window", None),
        *sublayer_dropout("residual_dropout", "embedding_dropout", same=True),  # Starcoder2MLP's is residual_dropout
    ),
    defaults={"vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30}
    | {"num_attention_heads": 24, "num_key_value_heads": 2, "hidden_act": "gelu_pytorch_tanh"}
    | {"max_position_embeddings": 4096, "tie_word_embeddings": True},
)
