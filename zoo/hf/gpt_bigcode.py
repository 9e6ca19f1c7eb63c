"""GPTBigCode (``GPTBigCodeForCausalLM``: StarCoder 1, SantaCoder): GPT-2 with ``nn.Linear`` layers, multi-query
attention (``multi_query``: zoo's ``mqa``), scores unscaled where ``scale_attn_weights`` is false (``attention.scale:
1.0``). The fused ``c_attn`` is ``[q (E) | k (D) | v (D)]`` with one key/value head, ``[H, 3, D]`` without: both
``grouped_qkv``'s layout."""

from __future__ import annotations

from .gpt2 import GPT2, GPT2_ONLY, IGNORED, LAYER, gpt2_linear_rules
from .mapping import ACTIVATIONS, HF_ACTIVATIONS, activation_option
from .rows_neox import fused_qkv
from .table import Computed, Key, Require, Unread

TANH = {**HF_ACTIVATIONS, "gelu_tanh": "gelu_pytorch_tanh"}  # GPT-2's gelu_new differs from it in the last bit
SOFTMAX = "transformers 5 keeps it but takes every softmax in float32, as zoo does on float32 weights"

GPT_BIGCODE = GPT2.derive(
    "gpt_bigcode",
    classes=("GPTBigCodeForCausalLM",),
    rules=gpt2_linear_rules(fused_qkv(f"{LAYER}.attn.c_attn"), "attn.c_proj"),
    ignored=(*IGNORED, "transformer.bias"),  # the causal-mask buffer of older checkpoints
    recipes=("starcoderbase-1b", "starcoder"),
    drop=("attention.type", *GPT2_ONLY),
    rows=(
        Key("multi_query", "attention.type", True, read=lambda v: "mqa" if v else "mha", write="mqa".__eq__),
        Require("attention.type", ("mha", "mqa")),
        Computed(
            "scale_attn_weights",
            keys={"scale_attn_weights": True},
            paths=("attention.scale",),
            read=lambda config, recipe: {} if config["scale_attn_weights"] else {"attention.scale": 1.0},
            write=lambda recipe, weights: {"scale_attn_weights": recipe.attention.scale is None},
            requires={"attention.scale": (None, 1.0)},
        ),
        Key("activation_function", "ffn.activation", "gelu_pytorch_tanh", ACTIVATIONS.get, TANH.get),
        activation_option("activation_function", "GPTBigCode"),
        Unread("num_key_value_heads", "GPTBigCodeConfig sets it from multi_query (1, else n_head)"),
        *(Unread(key, SOFTMAX) for key in ("attention_softmax_in_fp32", "scale_attention_softmax_in_fp32")),
    ),
)
