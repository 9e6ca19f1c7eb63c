"""Gemma (``GemmaForCausalLM``): Llama's table with a (1 + w) RMSNorm computed in float32 (``norm.offset: 1.0``),
token embeddings times ``sqrt(hidden_size)`` rounded to the weights' dtype (``embedding: {scale, round_scale}``) and
GeGLU with the tanh GELU. Gemma 2 and 3's rows are in rows_gemma, their local and global layers in layer_kinds."""

from typing import Any

from .llama import LLAMA
from .mapping import Option
from .rows_gemma import GATED_FFN, aliased
from .table import Fixed, Require


def tanh_gelu(recipe: Any) -> str | None:
    """A requirement of Gemma 1: a GeGLU's GELU is the tanh one (its config's ``gelu`` means tanh)."""
    if recipe.ffn.type == "geglu" and recipe.ffn.approximate != "tanh":
        return "ffn.approximate is 'none', needs 'tanh' (Gemma's hidden_act 'gelu' is read as the tanh GELU)"
    return None


BIDIRECTIONAL = "zoo's decoder is causal; a bidirectional Gemma is an encoder, which this family does not import"

GEMMA = LLAMA.derive(
    "gemma",
    classes=("GemmaForCausalLM",),
    recipes=("gemma-2b",),
    drop=("mlp_bias", "pretraining_tp", "sliding_window"),
    rows=(
        Fixed("embedding.scale", True),
        Fixed("embedding.round_scale", True),
        Fixed("norm.offset", 1.0),
        aliased(GATED_FFN, "hidden_act", gelu="gelu_pytorch_tanh"),  # GemmaConfig's (Gemma 2, 3 read gelu as is)
        Require("ffn.approximate", tanh_gelu),
        Fixed("ffn.bias", False),
        Option("use_bidirectional_attention", lambda v: not v, BIDIRECTIONAL),
    ),
    defaults={"vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28}
    | {"num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh"}
    | {"max_position_embeddings": 8192, "pad_token_id": 0, "tie_word_embeddings": True},
)
