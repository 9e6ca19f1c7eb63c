"""Persimmon (``PersimmonForCausalLM``): Llama's stack with LayerNorms, partial RoPE, a LayerNorm over each head's
queries and keys (``qk_layernorm``), biased projections, a biased ReLU² MLP and a fused ``query_key_value``."""

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
    recipes=("persimmon-8b-base",),
    drop=("heads", "rms_norm_eps", "attention_bias", "mlp_bias", "pretraining_tp", "sliding_window")
    + ("rope_parameters.partial_rotary_factor",),
    rows=(
        *mha("num_attention_heads", 64, "attention_dropout", 0.0),
        biases(True, True),
        rope(partial=True),
        qk_layernorm(True),
        *layernorm("layer_norm_eps"),
        plain_mlp(),
        PLAIN_ACTIVATION,
        Key("hidden_dropout", "dropout", 0.0),
    ),
    defaults={"vocab_size": 262144, "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 36}
    | {"max_position_embeddings": 16384, "partial_rotary_factor": 0.5},
)
