"""BERT (``BertModel``, ``BertForMaskedLM``, ``BertForSequenceClassification``, ``BertForTokenClassification``):
post-norm encoder.

Word, position and token-type embeddings are summed and normalised (zoo's ``embed_norm``); each block
normalises after its residual adds. The head follows the HF class: ``BertModel`` -> zoo's ``pooler``
head (its ``logits`` are HF's ``pooler_output``), ``BertForMaskedLM`` -> ``mlm``,
``BertForSequenceClassification`` -> ``classification`` with a pooler, ``BertForTokenClassification`` ->
``token_classification``.

An untied ``BertForMaskedLM`` of transformers 5 holds two output biases: the decoder's (``cls.predictions.
decoder.bias``, the one applied) and ``cls.predictions.bias`` (tied to it only when the embeddings are tied);
zoo keeps the second as the mlm head's ``spare_bias``, so both come back bit for bit. transformers 5's BERT
never reads ``position_embedding_type``: a config that carries ``relative_key`` imports when its weights are
the absolute kind, and weights of relative positions (``distance_embedding``) are refused by name.
"""

from __future__ import annotations

from typing import Any

from .mapping import ACTIVATIONS, Rule
from .rows_classic import (
    ABSOLUTE,
    BIASED,
    LEARNED,
    POST_NORM_ENCODER,
    TOKEN_CLASSIFIER,
    bert_body,
    bert_classes,
    by_head,
    encoder_heads,
    is_head,
    mha,
    mlm_rules,
    mlp,
    pad,
    width,
)
from .rows_encoder import BERT_HEADS, head_fits
from .table import Fixed, Key, Refused, Require, family

MLM = mlm_rules(
    "cls.predictions.transform.dense",
    "cls.predictions.transform.LayerNorm",
    "cls.predictions.decoder",
    "cls.predictions.bias",
)
"""BertForMaskedLM's head (BigBird's too)."""

RULES = (
    *bert_body("bert"),
    # BertForSequenceClassification: pooler, then classifier.
    Rule("bert.pooler.dense.weight", "head.pooler.dense.weight"),
    Rule("bert.pooler.dense.bias", "head.pooler.dense.bias"),
    Rule("classifier.weight", "head.proj.weight", when=is_head("classification")),
    Rule("classifier.bias", "head.proj.bias", when=is_head("classification")),
    *TOKEN_CLASSIFIER,
    *MLM,
)

IGNORED = (
    "bert.embeddings.position_ids",  # buffers of older checkpoints
    "bert.embeddings.token_type_ids",
    "cls.predictions.decoder.weight",  # the tied copy of the word embeddings
    "cls.predictions.decoder.bias",  # tied embeddings: the same tensor as cls.predictions.bias
    "bert.pooler.dense.weight",  # BertForMaskedLM has no pooler: HF drops it from pre-training checkpoints too
    "bert.pooler.dense.bias",
    "cls.seq_relationship.weight",  # the next-sentence head of pre-training checkpoints, which HF drops too
    "cls.seq_relationship.bias",
)

HEADS = bert_classes("Bert", pretraining=True)
CLASSES = by_head(HEADS)
fits_head = head_fits(BERT_HEADS)


def rename_tf_layer_norms(state: dict) -> dict:
    """Checkpoints converted from the original TensorFlow BERT name LayerNorm parameters gamma / beta."""
    renamed = {}
    for name, tensor in state.items():
        if ".LayerNorm." in name and name.endswith((".gamma", ".beta")):
            name = name.removesuffix(".gamma") + ".weight" if name.endswith(".gamma") else name[:-5] + ".bias"
        renamed[name] = tensor
    return renamed


def transform_activation(config: dict[str, Any], hf_class: str, head: dict[str, Any]) -> dict[str, Any]:
    """BertForMaskedLM's transform applies hidden_act too (gelu: the mlm head's default)."""
    if head["type"] == "mlm" and config["hidden_act"] != "gelu":
        head["activation"] = ACTIVATIONS[config["hidden_act"]]
    return head


def some_token_types(recipe: Any) -> str | None:
    return None if recipe.type_vocab_size >= 1 else "type_vocab_size is 0, needs >= 1"


BERT = family(
    "bert",
    classes=tuple(HEADS),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="bert.",
    head_prefixes=("cls.", "classifier."),
    recipes=("bert-base",),
    hf_class=lambda recipe: CLASSES[recipe.head.type],
    base_class="BertModel",
    layout=rename_tf_layer_norms,
    constants={},
    rows=(
        *POST_NORM_ENCODER,
        Key("type_vocab_size", "type_vocab_size", 2),
        Require("type_vocab_size", some_token_types),
        Key("vocab_size", "vocab_size", 30522),
        Key("hidden_size", "d_model", 768),
        Key("num_hidden_layers", "num_layers", 12),
        Key("max_position_embeddings", "max_len", 512),
        pad(0),
        LEARNED,
        ABSOLUTE,
        *mha("num_attention_heads", 12, "attention_probs_dropout_prob", 0.1),
        BIASED,
        Fixed("norm.type", "layernorm"),
        Key("layer_norm_eps", "norm.eps", 1e-12),
        *mlp("hidden_act", "gelu", "BERT"),
        width("intermediate_size", 3072),
        Key("hidden_dropout_prob", "dropout", 0.1),
        encoder_heads(HEADS, "cls.predictions.decoder.bias", fits_head, transform_activation),
        Refused("is_decoder", lambda v: not v, "zoo's encoder is bidirectional; a causal BERT is not supported"),
        Refused("add_cross_attention", lambda v: not v, "zoo's encoder has no cross-attention"),
        Refused("type_vocab_size", lambda v: isinstance(v, int) and v >= 1, "BERT needs token-type embeddings"),
    ),
)
