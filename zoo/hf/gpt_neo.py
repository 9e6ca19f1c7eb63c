"""GPT-Neo (``GPTNeoForCausalLM``): GPT-2 with ``nn.Linear`` layers, unbiased q/k/v projections, unscaled scores
(``attention.scale: 1.0``), and local layers (``attention_types``) that see ``window_size`` keys: zoo's ``window``."""

from .gpt2 import BLOCK, GPT2, GPT2_ONLY, LAYER, gpt2_linear_rules
from .mapping import Rule
from .rows import biases
from .rows_neox import dropout, wider
from .table import Fixed, Key, Unread
from .windows import pattern_windows

ATTENTION = f"{LAYER}.attn.attention"

GPT_NEO = GPT2.derive(
    "gpt_neo",
    classes=("GPTNeoForCausalLM",),
    rules=gpt2_linear_rules(
        tuple(Rule(f"{ATTENTION}.{p}_proj.weight", f"{BLOCK}.attention.{p}_proj.weight") for p in "qkv"),
        "attn.attention.out_proj",
    ),
    ignored=(f"{ATTENTION}.bias", f"{ATTENTION}.masked_bias", "lm_head.weight"),  # mask buffers; the tied copy
    recipes=("gpt-neo-1.3b", "gpt-neo-125m"),
    drop=("n_positions", "n_embd", "n_layer", "n_head", "attn_pdrop", "resid_pdrop", "embd_pdrop", "layers")
    + ("add_cross_attention", *GPT2_ONLY),
    rows=(
        Key("max_position_embeddings", "max_len", 2048),
        Key("hidden_size", "d_model", 2048),
        Key("num_layers", "num_layers", 24),
        Key("num_heads", "attention.num_heads", 16),
        Key("attention_dropout", "attention.dropout", 0.0),
        Fixed("attention.scale", 1.0),
        biases(False, True),
        wider("intermediate_size", "hidden_size"),
        dropout("resid_dropout", "embed_dropout"),  # after each sub-layer, and (written, not read) on the embeddings
        # a local query sees the window_size most recent keys, itself included: tril(1) ^ tril(1, -window_size)
        pattern_windows("attention_types", [[["global", "local"], 12]], ("window_size", 256)),
        Unread("attention_layers", "GPTNeoConfig recomputes it from attention_types"),
        Unread("classifier_dropout", "the dropout of GPT-Neo's classifier heads, classes zoo does not import"),
    ),
)
