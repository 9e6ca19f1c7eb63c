"""StarCoder2 (``Starcoder2ForCausalLM``): Llama's table with biased LayerNorms, one ``use_bias`` for every projection,
a sliding window, a two-layer MLP ``c_proj(gelu_tanh(c_fc(x)))`` and a tied head by default. Llama's heads row reads
and writes the ``head_dim`` that Starcoder2Attention (not Starcoder2Config) reads."""

from .llama import ATTENTION, BLOCK, COMMON, LAYER, LLAMA
from .mapping import HF_ACTIVATIONS, activation_option
from .rows import plain_mlp
from .rows_neox import every_bias, layernorm, linear_rules, sublayer_dropout
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

STARCODER2 = LLAMA.derive(
    "starcoder2",
    classes=("Starcoder2ForCausalLM",),
    rules=RULES,
    recipes=("starcoder2-3b",),
    drop=("attention_bias", "mlp_bias", "pretraining_tp", "rms_norm_eps", "sliding_window"),
    rows=(
        *layernorm("norm_epsilon"),
        every_bias("use_bias", True),
        plain_mlp(acts={**HF_ACTIVATIONS, "gelu_tanh": "gelu_pytorch_tanh"}),  # torch's tanh GELU, as published
        activation_option("hidden_act", "StarCoder2"),
        Key("sliding_window", "attention.window", None),
        *sublayer_dropout("residual_dropout", "embedding_dropout", same=True),  # Starcoder2MLP's is residual_dropout
    ),
    defaults={"vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30}
    | {"num_attention_heads": 24, "num_key_value_heads": 2, "hidden_act": "gelu_pytorch_tanh"}
    | {"max_position_embeddings": 4096, "tie_word_embeddings": True},
)
