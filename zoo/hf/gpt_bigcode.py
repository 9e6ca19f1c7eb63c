"""GPTBigCode (``GPTBigCodeForCausalLM``: StarCoder 1, SantaCoder): GPT-2 with ``nn.Linear`` layers (not Conv1D),
multi-query attention (``multi_query``: one key/value head, zoo's ``mqa``) and scores unscaled where
``scale_attn_weights`` is false (zoo's ``attention.scale: 1.0``).

The fused ``c_attn`` holds ``[q (E) | k (D) | v (D)]`` with one key/value head and, per head, ``[q | k | v]``
(``[H, 3, D]``) without: both ``grouped_qkv``'s layout.
"""

from __future__ import annotations

from ._common import grouped_qkv
from .gpt2 import GPT2, IGNORED, QKV_BIASES, QKV_WEIGHTS, SUMMARY
from .mapping import ACTIVATIONS, HF_ACTIVATIONS, Rule, activation_option
from .table import Computed, Key, Unread

LAYER, BLOCK = "transformer.h.{i}", "blocks.{i}"
LINEAR = ("attention_norm", "ffn_norm", "ffn.up_proj", "ffn.down_proj")


def linear_rules(*attention: Rule) -> tuple[Rule, ...]:
    """GPT-2's weight rows as ``nn.Linear`` holds them (out, in), around the family's ``attention`` rows."""
    return (
        Rule("transformer.wte.weight", "embedding.token.weight"),
        Rule("transformer.wpe.weight", "positional.embedding.weight"),
        *attention,
        *(
            Rule(f"{LAYER}.{hf}.{kind}", f"{BLOCK}.{zoo}.{kind}")
            for hf, zoo in zip(("ln_1", "ln_2", "mlp.c_fc", "mlp.c_proj"), LINEAR, strict=True)
            for kind in ("weight", "bias")
        ),
        Rule("transformer.ln_f.weight", "final_norm.weight"),
        Rule("transformer.ln_f.bias", "final_norm.bias"),
        Rule("lm_head.weight", "head.proj.weight"),  # only when untied
    )


RULES = linear_rules(
    Rule(f"{LAYER}.attn.c_attn.weight", QKV_WEIGHTS, grouped_qkv),
    Rule(f"{LAYER}.attn.c_attn.bias", QKV_BIASES, grouped_qkv),
    Rule(f"{LAYER}.attn.c_proj.weight", f"{BLOCK}.attention.o_proj.weight"),
    Rule(f"{LAYER}.attn.c_proj.bias", f"{BLOCK}.attention.o_proj.bias"),
)

TANH = {**HF_ACTIVATIONS, "gelu_tanh": "gelu_pytorch_tanh"}
SOFTMAX = "transformers 5 keeps it but takes every softmax in float32, as zoo does on float32 weights"

GPT_BIGCODE = GPT2.derive(
    "gpt_bigcode",
    classes=("GPTBigCodeForCausalLM",),
    rules=RULES,
    ignored=(*IGNORED, "transformer.bias"),  # the causal-mask buffer of older checkpoints
    recipes=("starcoderbase-1b", "starcoder"),
    drop=("attention.type", "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn")
    + SUMMARY,
    rows=(
        Computed(
            "multi_query",
            keys={"multi_query": True},
            paths=("attention.type",),
            read=lambda config, recipe: {"attention.type": "mqa" if config["multi_query"] else "mha"},
            write=lambda recipe, weights: {"multi_query": recipe.attention.type == "mqa"},
            requires={"attention.type": ("mha", "mqa")},
        ),
        Computed(
            "scale_attn_weights",
            keys={"scale_attn_weights": True},
            paths=("attention.scale",),
            read=lambda config, recipe: {} if config["scale_attn_weights"] else {"attention.scale": 1.0},
            write=lambda recipe, weights: {"scale_attn_weights": recipe.attention.scale is None},
            requires={"attention.scale": (None, 1.0)},
        ),
        # gelu_tanh goes out as the family's own name: gelu_new, GPT-2's, differs from it in the last bit
        Key("activation_function", "ffn.activation", "gelu_pytorch_tanh", ACTIVATIONS.get, TANH.get),
        activation_option("activation_function", "GPTBigCode"),
        Unread("num_key_value_heads", "GPTBigCodeConfig sets it from multi_query (1, else n_head)"),
        Unread("attention_softmax_in_fp32", SOFTMAX),
        Unread("scale_attention_softmax_in_fp32", SOFTMAX),
    ),
)
