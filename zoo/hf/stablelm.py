"""StableLM 2 and StableLM 3B 4E1T (``StableLmForCausalLM``): Llama's decoder with biased LayerNorms, RoPE over the
first ``partial_rotary_factor`` of each head (rotate-half pairs), optional q/k/v biases (``use_qkv_bias``) and, with
``use_parallel_residual``, attention and SwiGLU in parallel from one shared norm."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .llama import LLAMA
from .mapping import Rule
from .rows import biases, heads
from .rows_neox import flag, layernorm, rope
from .table import Fixed, Key, Refused


def one_norm(recipe: Any) -> str | None:
    """A requirement: a parallel block shares one norm (StableLM's parallel block has no post_attention_layernorm)."""
    if recipe.block.parallel and not recipe.block.shared_norm:
        return "block.shared_norm is False, needs True in a parallel block (StableLM's has one norm)"
    return None


# the LayerNorms' biases; post_attention_layernorm is the sequential block's
NORM_BIASES = ("model.layers.{i}.input_layernorm", "blocks.{i}.attention_norm"), ("model.norm", "final_norm")
NORM_BIASES += (("model.layers.{i}.post_attention_layernorm", "blocks.{i}.ffn_norm"),)

STABLELM = LLAMA.derive(
    "stablelm",
    classes=("StableLmForCausalLM",),
    rules=(*LLAMA.rules, *(Rule(f"{hf}.bias", f"{zoo}.bias") for hf, zoo in NORM_BIASES)),
    recipes=("stablelm-2-1.6b",),
    drop=("rms_norm_eps", "attention_bias", "mlp_bias", "sliding_window", "pretraining_tp")
    + ("rope_parameters.partial_rotary_factor",),
    rows=(
        heads(head_dim=False),
        rope(),
        *layernorm("layer_norm_eps"),
        replace(  # the recipe states the unbiased output projection even when q/k/v have no bias either
            biases("use_qkv_bias", False),
            read=lambda config, recipe: {"attention.bias": bool(config["use_qkv_bias"]), "attention.o_bias": False},
        ),
        Fixed("ffn.bias", False),
        flag("parallel", "use_parallel_residual", False, "block.parallel", "block.shared_norm", check=one_norm),
        Key("hidden_dropout", "dropout", 0.0),
        Refused(  # StableLM 2 12B's
            "qk_layernorm",
            lambda v: not v,
            "StableLM normalises the queries and keys of each head with that head's own LayerNorm (no bias); "
            "zoo's qk_norm is one norm shared by all heads",
            export=False,
        ),
    ),
    defaults={"vocab_size": 50304, "intermediate_size": 6912, "hidden_size": 2560, "num_key_value_heads": 32}
    | {"max_position_embeddings": 4096},
)
