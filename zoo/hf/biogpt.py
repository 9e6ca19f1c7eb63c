"""BioGPT (``BioGptForCausalLM``): XGLM's fairseq-style decoder with learned positions read two rows on
(``embed_positions`` has ``max_position_embeddings + 2`` rows: ``positional: {type: learned, offset: 2}``) and
BERT's names for the config keys. Its LayerNorms keep PyTorch's eps (1e-5): transformers never reads
``layer_norm_eps``."""

from __future__ import annotations

from ._common import renamed
from .mapping import Rule
from .rows_classic import defers_to, mlp, pad, width
from .table import Fixed, Key, Unread
from .xglm import XGLM

BODY = renamed(XGLM.rules, {"model.": "biogpt.", "lm_head.": "output_projection."})

BIOGPT = XGLM.derive(
    "biogpt",
    classes=("BioGptForCausalLM",),
    rules=(BODY[0], Rule("biogpt.embed_positions.weight", "positional.embedding.weight"), *BODY[1:]),
    ignored=("output_projection.weight",),  # the tied copy of embed_tokens
    base_prefix="biogpt.",
    head_prefixes=("output_projection.",),
    recipes=("biogpt",),
    drop=("d_model", "num_layers", "attention_heads", "activation_function", "dropout", "attention_dropout")
    + ("positional.layout", "pad_token_id", "add_cross_attention", "decoder_start_token_id", "init_std"),
    rows=(
        Key("hidden_size", "d_model", 1024),
        Key("num_hidden_layers", "num_layers", 24),
        Key("num_attention_heads", "attention.num_heads", 16),
        Key("attention_probs_dropout_prob", "attention.dropout", 0.1),
        width("intermediate_size", 4096),
        *mlp("hidden_act", "gelu", "BioGPT"),
        Key("hidden_dropout_prob", "dropout", 0.1),
        pad(1),
        defers_to("opt", "biogpt"),
        Fixed("positional.type", "learned"),
        Unread("layer_norm_eps", "BioGPT builds its LayerNorms with PyTorch's eps (1e-5) and never reads it"),
    ),
    defaults={"vocab_size": 42384, "max_position_embeddings": 1024},
)
