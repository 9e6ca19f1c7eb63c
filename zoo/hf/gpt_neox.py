"""GPT-NeoX and Pythia (``GPTNeoXForCausalLM``): LayerNorm pre-norm decoders whose attention and MLP read the
block's input in parallel, each through its own norm (``use_parallel_residual``; false: the sequential
block), RoPE over the first ``rotary_pct`` of each head (rotate-half pairs), biased MHA and MLP, an untied head.

The fused ``query_key_value`` projection holds, head after head, that head's query, key and value
(``[H, 3, D]`` rows), split into zoo's q, k and v. Transformers 5 saves the head as ``embed_out`` (its
checkpoints' name), as does zoo. Phi (``zoo/hf/phi.py``) derives from this table.
"""

from __future__ import annotations

from .mapping import Rule
from .rope import ROPE_OPTIONS
from .rows_classic import mlp, width
from .rows_neox import bias_flag, decoder, dropout, fused_qkv, layernorm, linear_rules, lm_head, mha, rope
from .table import Key, Unread, family

LAYER = "gpt_neox.layers.{i}."

RULES = (
    Rule("gpt_neox.embed_in.weight", "embedding.token.weight"),
    *linear_rules(LAYER, "blocks.{i}.", "input_layernorm attention_norm", "post_attention_layernorm ffn_norm"),
    *linear_rules(LAYER, "blocks.{i}.", "attention.dense attention.o_proj", "mlp.dense_h_to_4h ffn.up_proj"),
    *linear_rules(LAYER, "blocks.{i}.", "mlp.dense_4h_to_h ffn.down_proj"),
    *fused_qkv(f"{LAYER}attention.query_key_value"),
    *linear_rules("gpt_neox.", "", "final_layer_norm final_norm"),
    Rule("embed_out.weight", "head.proj.weight"),  # only when untied
)

IGNORED = (
    f"{LAYER}attention.bias",  # causal-mask buffers of older checkpoints
    f"{LAYER}attention.masked_bias",
    f"{LAYER}attention.rotary_emb.inv_freq",
    "embed_out.weight",  # the tied copy some checkpoints store
)

GPT_NEOX = family(
    "gpt_neox",
    classes=("GPTNeoXForCausalLM",),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="gpt_neox.",
    head_prefixes=("embed_out.",),
    recipes=("pythia-160m",),
    rows=(
        *decoder(50432, 6144, 44, 2048),
        Key("use_parallel_residual", "block.parallel", True, read=bool),  # two norms in parallel, not shared
        mha("num_attention_heads", 64),
        Key("attention_dropout", "attention.dropout", 0.0),
        bias_flag("attention_bias", True),
        rope("rotary_emb_base", "rotary_pct"),
        *ROPE_OPTIONS,
        *layernorm("layer_norm_eps"),
        *mlp("hidden_act", "gelu", "GPT-NeoX"),
        width("intermediate_size", 24576),
        *lm_head(tied=False),
        dropout("hidden_dropout"),
        Unread(
            "classifier_dropout", "the dropout of GPTNeoXForTokenClassification's head, a class zoo does not import"
        ),
        Unread("is_decoder", "a generic flag GPTNeoXForCausalLM does not read: its attention is always causal"),
    ),
)
