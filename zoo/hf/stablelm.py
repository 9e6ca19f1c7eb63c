"""StableLM 2 and StableLM 3B 4E1T (``StableLmForCausalLM``): Llama's decoder with biased LayerNorms, RoPE over the
first ``partial_rotary_factor`` of each head (rotate-half pairs), optional q/k/v biases (``use_qkv_bias``) and, with
``use_parallel_residual``, attention and SwiGLU in parallel from one shared norm."""

from dataclasses import replace

from .llama import LLAMA
from .rows import biases, heads
from .rows_neox import NORM_BIASES, layernorm, parallel_flag, rope
from .table import Fixed, Key, Refused

STABLELM = LLAMA.derive(
    "stablelm",
    classes=("StableLmForCausalLM",),
    rules=(*LLAMA.rules, *NORM_BIASES),
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
        parallel_flag("use_parallel_residual", False, "StableLM"),
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
