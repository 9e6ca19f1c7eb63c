"""Persimmon (``PersimmonForCausalLM``): Llama's stack with LayerNorms, RoPE over the leading
``partial_rotary_factor`` (0.5) of each head, a LayerNorm over each head's queries and keys before it
(``qk_layernorm``: zoo's ``qk_norm``, the recipe's norm), biased projections, a biased ReLU² MLP
(``down(relu(up(x))²)``), an untied head and a fused ``query_key_value``."""

from __future__ import annotations

from .llama import LLAMA
from .mapping import Rule
from .rows import PLAIN_ACTIVATION, biases, plain_mlp, rope
from .rows_classic import mha
from .rows_neox import fused_qkv, layernorm, linear_rules, qk_layernorm
from .table import Key

LAYER = ("input_layernorm attention_norm", "self_attn.dense attention.o_proj")
QK_NORMS = ("self_attn.q_layernorm attention.q_norm", "self_attn.k_layernorm attention.k_norm")
MLP = ("post_attention_layernorm ffn_norm", "mlp.dense_h_to_4h ffn.up_proj", "mlp.dense_4h_to_h ffn.down_proj")


PERSIMMON = LLAMA.derive(
    "persimmon",
    classes=("PersimmonForCausalLM",),
    rules=(
        Rule("model.embed_tokens.weight", "embedding.token.weight"),
        *fused_qkv("model.layers.{i}.self_attn.query_key_value"),  # per head [q | k | v] ([H, 3, D])
        *linear_rules("model.layers.{i}.", "blocks.{i}.", *LAYER, *QK_NORMS, *MLP),
        *linear_rules("model.", "", "final_layernorm final_norm"),
        Rule("lm_head.weight", "head.proj.weight"),  # only when untied
    ),
    ignored=("lm_head.weight",),  # the tied copy of embed_tokens
    recipes=("persimmon-8b-base",),
    drop=("heads", "rms_norm_eps", "attention_bias", "mlp_bias", "pretraining_tp", "sliding_window")
    + ("rope_parameters.partial_rotary_factor",),
    rows=(
        *mha("num_attention_heads", 64, "attention_dropout", 0.0),
        biases(True, True),
        rope(partial=True),
        qk_layernorm(
            True,
            lambda recipe: recipe.attention.qk_norm_scope == "head",
            "the recipe's norm over each head, or none",
            ("attention.qk_norm_scope",),
        ),
        *layernorm("layer_norm_eps"),
        plain_mlp(),
        PLAIN_ACTIVATION,
        Key("hidden_dropout", "dropout", 0.0),
    ),
    defaults={"vocab_size": 262144, "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 36}
    | {"max_position_embeddings": 16384, "partial_rotary_factor": 0.5},
)
