"""DistilBERT (``DistilBertForMaskedLM``, ``DistilBertForSequenceClassification``,
``DistilBertForTokenClassification``): BERT's post-norm encoder without token types, under its own names.

Word and position embeddings are summed and normalised; every LayerNorm has eps 1e-12 (the config has no key
for it). ``sinusoidal_pos_embds`` fills the position table with sinusoids at initialisation only: the table is
a parameter like any other, so it imports as zoo's learned table with ``sinusoidal_init`` (which a fresh zoo
model fills the same way). The heads are DistilBERT's own: the masked LM's ``vocab_transform``, activation,
``vocab_layer_norm`` and ``vocab_projector`` (zoo's ``mlm`` head); the sequence classifier's
``pre_classifier`` with a ReLU, then ``classifier`` (zoo's classification head with a ReLU pooler on the first
token); the token classifier's ``classifier`` on every token. The bare ``DistilBertModel`` has no pooler nor any
head zoo's encoder could end in, so it does not import.
"""

from __future__ import annotations

from typing import Any

from .mapping import ACTIVATIONS, Rule, num_labels
from .rows_classic import (
    BIASED,
    LEARNED,
    POST_NORM_ENCODER,
    bert_classes,
    by_head,
    is_head,
    labels,
    mha,
    mlp,
    no_spares,
    pad,
    width,
)
from .table import Computed, Fixed, Key, Unread, family

LAYER, BLOCK = "distilbert.transformer.layer.{i}", "blocks.{i}"
EPS = 1e-12
"""DistilBERT's LayerNorms' eps, fixed in its code."""


RULES = (
    Rule("distilbert.embeddings.word_embeddings.weight", "embedding.token.weight"),
    Rule("distilbert.embeddings.position_embeddings.weight", "positional.embedding.weight"),
    Rule("distilbert.embeddings.LayerNorm.weight", "embed_norm.weight"),
    Rule("distilbert.embeddings.LayerNorm.bias", "embed_norm.bias"),
    *(
        Rule(f"{LAYER}.{hf}.{kind}", f"{BLOCK}.{zoo}.{kind}")
        for hf, zoo in (
            ("attention.q_lin", "attention.q_proj"),
            ("attention.k_lin", "attention.k_proj"),
            ("attention.v_lin", "attention.v_proj"),
            ("attention.out_lin", "attention.o_proj"),
            ("sa_layer_norm", "attention_norm"),
            ("ffn.lin1", "ffn.up_proj"),
            ("ffn.lin2", "ffn.down_proj"),
            ("output_layer_norm", "ffn_norm"),
        )
        for kind in ("weight", "bias")
    ),
    # DistilBertForMaskedLM
    Rule("vocab_transform.weight", "head.transform.weight"),
    Rule("vocab_transform.bias", "head.transform.bias"),
    Rule("vocab_layer_norm.weight", "head.norm.weight"),
    Rule("vocab_layer_norm.bias", "head.norm.bias"),
    Rule("vocab_projector.weight", "head.proj.weight", when=is_head("mlm")),  # only when untied
    Rule("vocab_projector.bias", "head.proj.bias", when=is_head("mlm")),
    # DistilBertForSequenceClassification: pre_classifier + ReLU on the first token, then classifier.
    Rule("pre_classifier.weight", "head.pooler.dense.weight"),
    Rule("pre_classifier.bias", "head.pooler.dense.bias"),
    Rule("classifier.weight", "head.proj.weight", when=lambda r: r.head.type != "mlm"),
    Rule("classifier.bias", "head.proj.bias", when=lambda r: r.head.type != "mlm"),
)

IGNORED = ("distilbert.embeddings.position_ids", "vocab_projector.weight")  # an old buffer; the tied copy

HEADS = bert_classes("DistilBert", bare=False)  # DistilBertModel has no head zoo's encoder could end in
CLASSES = by_head(HEADS)


def head(config: dict[str, Any], recipe: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict:
    """DistilBERT's own heads: the masked LM's vocab_transform applies ``activation`` too; the sequence classifier
    drops out at ``seq_classif_dropout``, the token classifier at ``dropout``."""
    kind = HEADS[hf_class]
    if kind == "mlm":
        spec: dict[str, Any] = {"type": "mlm", "tie_embeddings": bool(config["tie_word_embeddings"]), "eps": EPS}
        if config["activation"] != "gelu":
            spec["activation"] = ACTIVATIONS[config["activation"]]
        return {"head": spec}
    if kind == "classification":
        spec = {"type": "classification", "pool": "cls", "pooler": True, "pooler_activation": "relu"}
        spec["dropout"] = config["seq_classif_dropout"]
    else:
        spec = {"type": "token_classification", "dropout": config["dropout"]}
    return {"head": spec, "num_classes": num_labels(config)}


def hf_head(recipe: Any, weights: Any) -> dict[str, Any]:
    kind = recipe.head.type
    out: dict[str, Any] = {"tie_word_embeddings": kind != "mlm" or recipe.head.tie_embeddings}
    if kind != "mlm":
        out.update(labels(recipe.num_classes))
    if kind == "classification":
        out["seq_classif_dropout"] = recipe.head.dropout
    return out


def fits_head(recipe: Any) -> str | None:
    """A requirement: a head of a DistilBERT class, as that class builds it."""
    head = recipe.head
    if head.type not in CLASSES:
        return f"head.type is {head.type!r}, needs one of {', '.join(map(repr, CLASSES))}"
    spares = no_spares(head)
    if spares:
        return spares
    if head.type == "mlm":
        if recipe.ffn.type == "mlp" and head.activation != recipe.ffn.activation:
            return f"head.activation is {head.activation!r}, needs ffn.activation ({recipe.ffn.activation!r})"
        if not (head.transform_bias and head.norm_bias and head.bias):
            return "head.transform_bias, norm_bias and bias must be True (DistilBERT's masked-LM head)"
        if head.eps != EPS or head.spare_bias:
            return f"head.eps is {head.eps} and spare_bias {head.spare_bias}, needs {EPS} and False (DistilBERT)"
    if head.type == "classification":
        if head.pool != "cls" or not head.pooler or head.pooler_activation != "relu":
            return (
                f"head is pool {head.pool!r}, pooler {head.pooler}, pooler_activation {head.pooler_activation!r}; "
                "needs 'cls', True, 'relu' (DistilBERT's pre_classifier)"
            )
    if head.type == "token_classification" and head.dropout != recipe.dropout:
        return f"head.dropout is {head.dropout}, needs dropout ({recipe.dropout}): DistilBERT's token classifier's"
    return None


DISTILBERT = family(
    "distilbert",
    classes=tuple(HEADS),
    rules=RULES,
    ignored=IGNORED,
    base_prefix="distilbert.",
    head_prefixes=("vocab_", "pre_classifier.", "classifier."),
    recipes=("distilbert-base",),
    hf_class=lambda recipe: CLASSES[recipe.head.type],
    constants={},
    rows=(
        *POST_NORM_ENCODER,
        Fixed("type_vocab_size", 0),
        Key("vocab_size", "vocab_size", 30522),
        Key("max_position_embeddings", "max_len", 512),
        Key("n_layers", "num_layers", 6),
        Key("dim", "d_model", 768),
        pad(0),
        LEARNED,
        Key("sinusoidal_pos_embds", "positional.sinusoidal_init", False, read=bool),
        *mha("n_heads", 12, "attention_dropout", 0.1),
        BIASED,
        Fixed("norm.type", "layernorm"),
        Fixed("norm.eps", EPS),
        *mlp("activation", "gelu", "DistilBERT"),
        width("hidden_dim", 3072),
        Key("dropout", "dropout", 0.1),
        Computed(
            "head",
            keys={"tie_word_embeddings": True, "seq_classif_dropout": 0.2},
            paths=("head.*", "num_classes"),
            read=head,
            write=hf_head,
            requires={"head": fits_head},
            checkpoint=True,
            conditional=("seq_classif_dropout",),
        ),
        Unread("qa_dropout", "the dropout of the question-answering head, which zoo does not import"),
    ),
)
