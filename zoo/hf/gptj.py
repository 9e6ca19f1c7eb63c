"""GPT-J (``GPTJForCausalLM``): a LayerNorm pre-norm decoder whose attention and MLP read one shared norm of
the block's input in parallel, RoPE over the first ``rotary_dim`` dims of each head in adjacent pairs
(zoo's ``interleaved``, base 10000), unbiased q/k/v/out projections, a biased GELU-tanh MLP and a biased,
untied LM head.
"""

from .mapping import Rule
from .rows_classic import biases, mlp
from .rows_neox import (
    DECODER,
    PARALLEL_SHARED,
    TOKENS,
    biased_head,
    dropout,
    layernorm,
    linear_rules,
    mha,
    rotary_dim,
    wider,
)
from .table import Key, family

LAYER, BLOCK = "transformer.h.{i}", "blocks.{i}"

RULES = (
    Rule("transformer.wte.weight", "embedding.token.weight"),
    *(Rule(f"{LAYER}.attn.{p}_proj.weight", f"{BLOCK}.attention.{p}_proj.weight") for p in "qkv"),
    Rule(f"{LAYER}.attn.out_proj.weight", f"{BLOCK}.attention.o_proj.weight"),
    *linear_rules(f"{LAYER}.", f"{BLOCK}.", "ln_1 attention_norm", "mlp.fc_in ffn.up_proj", "mlp.fc_out ffn.down_proj"),
    *linear_rules("", "", "transformer.ln_f final_norm", "lm_head head.proj"),
)

NO_ROTARY_DIM = (
    "rotary_dim=None with n_head={heads} is not supported: GPT-J then builds its cos/sin table n_embd ({n_embd}) "
    "wide, which fits no head of {head_dim} dims (transformers fails too)"
)
IGNORED = (f"{LAYER}.attn.bias", f"{LAYER}.attn.masked_bias")  # causal-mask buffers of older checkpoints


GPTJ = family(
    "gptj",
    classes=("GPTJForCausalLM",),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="transformer.",
    recipes=("gpt-j-6b",),
    rows=(
        *DECODER,
        Key("vocab_size", "vocab_size", 50400),
        Key("n_embd", "d_model", 4096),
        Key("n_layer", "num_layers", 28),
        Key("n_positions", "max_len", 2048),
        TOKENS,
        *PARALLEL_SHARED,
        mha("n_head", 16),
        Key("attn_pdrop", "attention.dropout", 0.0),
        biases(False),
        *rotary_dim(NO_ROTARY_DIM),
        *layernorm("layer_norm_epsilon"),
        *mlp("activation_function", "gelu_new", "GPT-J"),
        wider("n_inner", "n_embd"),
        dropout("resid_pdrop", "embd_pdrop"),
        *biased_head("GPT-J"),
    ),
)
