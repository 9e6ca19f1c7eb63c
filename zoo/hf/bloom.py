"""BLOOM (``BloomForCausalLM``): ALiBi instead of positions, a LayerNorm on the embeddings
(``word_embeddings_layernorm``: zoo's ``embed_norm: true``), pre-norm LayerNorm blocks of biased MHA and a
4x GELU-tanh MLP, a final LayerNorm and a tied head.

The fused ``query_key_value`` projection holds, head after head, that head's query, key and value
(``[H, 3, D]`` rows), split into zoo's q, k and v. BLOOM's ALiBi slopes are zoo's for every head count
(powers of two or not), and its bias ``slope * key position`` (positions counted over the attention mask, so
padding shifts none) differs from zoo's ``-slope * |query - key|`` by a constant per query row, which the
softmax removes. BLOOM's config has no length (ALiBi is not bounded by one): zoo's ``max_len``, the default
decoding length, is 2048, the length BLOOM was trained at.
"""

from __future__ import annotations

from typing import Any

from .mapping import Rule, default_head_dim
from .rows_classic import BIASED, PRE_NORM
from .rows_neox import TOKENS, dropout, fused_qkv, layernorm, linear_rules, lm_head
from .table import Computed, Fixed, Key, Refused, Require, Unread, family, get

LAYER = "transformer.h.{i}."

RULES = (
    Rule("transformer.word_embeddings.weight", "embedding.token.weight"),
    *linear_rules(LAYER, "blocks.{i}.", "input_layernorm attention_norm", "post_attention_layernorm ffn_norm"),
    *linear_rules(LAYER, "blocks.{i}.", "self_attention.dense attention.o_proj", "mlp.dense_h_to_4h ffn.up_proj"),
    *linear_rules(LAYER, "blocks.{i}.", "mlp.dense_4h_to_h ffn.down_proj"),
    *fused_qkv(f"{LAYER}self_attention.query_key_value"),
    *linear_rules("transformer.", "", "word_embeddings_layernorm embed_norm", "ln_f final_norm"),
    Rule("lm_head.weight", "head.proj.weight"),  # only when untied
)


def aliased(key: str, default: Any, alias: str, path: str) -> Computed:
    """``key`` (written), which ``alias`` overrides where a config gives it (read only): BloomConfig's older
    ``n_embed`` for ``hidden_size``, its ``attribute_map`` names ``num_hidden_layers`` and ``num_attention_heads``."""
    return Computed(
        key,
        keys={key: default, alias: None},
        paths=(path,),
        read=lambda config, recipe: {path: config[alias] if config.get(alias) is not None else config[key]},
        write=lambda recipe, weights: {key: get(recipe, path)},
        legacy=(alias,),
    )


def four_times_wider(recipe: Any) -> str | None:
    """A requirement: an MLP of 4 * d_model (BLOOM's config has no key for its width)."""
    hidden = recipe.ffn.hidden
    if hidden not in (None, 4 * recipe.d_model):
        return f"ffn.hidden is {hidden}, needs 4 * d_model ({4 * recipe.d_model}): BLOOM's MLP width is fixed"
    return None


BLOOM = family(
    "bloom",
    classes=("BloomForCausalLM",),
    rules=RULES,
    ignored=("lm_head.weight",),  # the tied copy of word_embeddings some checkpoints store
    base_prefix="transformer.",
    recipes=("bloom-560m",),
    rows=(
        Fixed("architecture", "decoder"),
        *PRE_NORM,
        Fixed("embed_norm", True),  # word_embeddings_layernorm
        Fixed("type_vocab_size", 0, imported=False),
        Key("vocab_size", "vocab_size", 250880),
        aliased("hidden_size", 64, "n_embed", "d_model"),
        aliased("n_layer", 2, "num_hidden_layers", "num_layers"),
        TOKENS,  # no padding row
        Fixed("positional.type", "alibi"),
        Fixed("attention.type", "mha"),
        aliased("n_head", 8, "num_attention_heads", "attention.num_heads"),
        Require("attention.head_dim", default_head_dim),
        Key("attention_dropout", "attention.dropout", 0.0),
        BIASED,
        *layernorm("layer_norm_epsilon"),
        Fixed("ffn.type", "mlp"),
        Fixed("ffn.activation", "gelu_tanh"),
        Computed(
            "unstated",  # what BLOOM's config has no key for: the length it was trained at, its 4x MLP
            keys={},
            paths=("max_len", "ffn.hidden"),
            read=lambda config, recipe: {"max_len": 2048, "ffn.hidden": 4 * recipe["d_model"]},
            write=lambda recipe, weights: {},
            requires={"ffn.hidden": four_times_wider},
        ),
        *lm_head(tied=True),
        dropout("hidden_dropout"),
        Refused(
            "apply_residual_connection_post_layernorm",
            lambda v: not v,
            "zoo's residual stream carries the block's input, not its normalised input",
            export=False,
        ),
        Unread("pretraining_tp", "dense layers run as pretraining_tp summed slices (slow_but_exact): the same matmuls"),
        Unread("slow_but_exact", "the order of the sliced matmuls' sums (with pretraining_tp > 1): the same function"),
    ),
)
