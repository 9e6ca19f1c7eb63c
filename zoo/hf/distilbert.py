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

from ._common import defaults_except
from .bert import classifier_config
from .mapping import (
    ACTIVATIONS,
    CLASSIC_BLOCK,
    HF_ACTIVATIONS,
    Family,
    Rule,
    activation_option,
    dtype_name,
    no_layer_overrides,
    num_labels,
)

LAYER, BLOCK = "distilbert.transformer.layer.{i}", "blocks.{i}"
EPS = 1e-12
"""DistilBERT's LayerNorms' eps, fixed in its code."""


def _head(kind: str):
    return lambda recipe: recipe.head.type == kind


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
    Rule("vocab_projector.weight", "head.proj.weight", when=_head("mlm")),  # only when untied
    Rule("vocab_projector.bias", "head.proj.bias", when=_head("mlm")),
    # DistilBertForSequenceClassification: pre_classifier + ReLU on the first token, then classifier.
    Rule("pre_classifier.weight", "head.pooler.dense.weight"),
    Rule("pre_classifier.bias", "head.pooler.dense.bias"),
    Rule("classifier.weight", "head.proj.weight", when=lambda r: r.head.type != "mlm"),
    Rule("classifier.bias", "head.proj.bias", when=lambda r: r.head.type != "mlm"),
)

IGNORED = ("distilbert.embeddings.position_ids", "vocab_projector.weight")  # an old buffer; the tied copy

DEFAULTS: dict[str, Any] = {
    "vocab_size": 30522,
    "max_position_embeddings": 512,
    "sinusoidal_pos_embds": False,
    "n_layers": 6,
    "n_heads": 12,
    "dim": 768,
    "hidden_dim": 3072,
    "dropout": 0.1,
    "attention_dropout": 0.1,
    "activation": "gelu",
    "seq_classif_dropout": 0.2,
    "pad_token_id": 0,
    "tie_word_embeddings": True,
}

OPTIONS = (activation_option("activation", "DistilBERT"),)

HEADS = {
    "DistilBertForMaskedLM": "mlm",
    "DistilBertForSequenceClassification": "classification",
    "DistilBertForTokenClassification": "token_classification",
}
CLASSES = {kind: name for name, kind in HEADS.items()}


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    head_type = HEADS[hf_class]
    extra: dict[str, Any] = {}
    if head_type == "mlm":  # vocab_transform applies `activation` too
        head: dict[str, Any] = {"type": "mlm", "tie_embeddings": bool(config["tie_word_embeddings"]), "eps": EPS}
        if config["activation"] != "gelu":
            head["activation"] = ACTIVATIONS[config["activation"]]
    elif head_type == "classification":
        head = {"type": "classification", "pool": "cls", "pooler": True, "pooler_activation": "relu"}
        head["dropout"] = config["seq_classif_dropout"]
        extra["num_classes"] = num_labels(config)
    else:
        head = {"type": "token_classification", "dropout": config["dropout"]}
        extra["num_classes"] = num_labels(config)
    pad = config["pad_token_id"]
    embedding: dict[str, Any] = {"type": "token"}
    if pad is not None and 0 <= pad < config["vocab_size"]:
        embedding["padding_idx"] = pad
    positional: dict[str, Any] = {"type": "learned"}
    if config["sinusoidal_pos_embds"]:
        positional["sinusoidal_init"] = True
    return {
        "architecture": "encoder",
        "vocab_size": config["vocab_size"],
        "type_vocab_size": 0,
        "pad_token_id": pad,
        "d_model": config["dim"],
        "num_layers": config["n_layers"],
        "max_len": config["max_position_embeddings"],
        "norm_position": "post",
        "embedding": embedding,
        "attention": {"type": "mha", "num_heads": config["n_heads"], "dropout": config["attention_dropout"]},
        "positional": positional,
        "norm": {"type": "layernorm", "eps": EPS},
        "ffn": {"type": "mlp", "hidden": config["hidden_dim"], "activation": ACTIVATIONS[config["activation"]]},
        "head": head,
        "dropout": config["dropout"],
        **extra,
    }


def config(recipe, weights) -> dict[str, Any]:
    head = recipe.head
    out: dict[str, Any] = {
        "vocab_size": recipe.vocab_size,
        "max_position_embeddings": recipe.max_len,
        "sinusoidal_pos_embds": recipe.positional.sinusoidal_init,
        "n_layers": recipe.num_layers,
        "n_heads": recipe.attention.num_heads,
        "dim": recipe.d_model,
        "hidden_dim": weights["blocks.0.ffn.up_proj.weight"].shape[0],
        "dropout": recipe.dropout,
        "attention_dropout": recipe.attention.dropout,
        "activation": HF_ACTIVATIONS[recipe.ffn.activation],
        "pad_token_id": recipe.pad_token_id,
        "tie_word_embeddings": head.type != "mlm" or head.tie_embeddings,
        "dtype": dtype_name(weights),
    }
    out.update(classifier_config(recipe))
    if head.type == "classification":
        out["seq_classif_dropout"] = out.pop("classifier_dropout")
    elif head.type == "token_classification":
        out.pop("classifier_dropout")  # DistilBERT's token classifier drops out with `dropout`
    return out


def _fits_head(recipe) -> str | None:
    head = recipe.head
    if head.type not in CLASSES:
        return f"head.type is {head.type!r}, needs one of {', '.join(map(repr, CLASSES))}"
    if getattr(head, "spare_pooler", False):
        return "head.spare_pooler is True, needs False (only BigBird's heads keep an unused pooler)"
    if getattr(head, "spare_nsp", False):
        return "head.spare_nsp is True, needs False (only BigBirdForPreTraining keeps an unused next-sentence head)"
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


REQUIREMENTS = {
    "architecture": "encoder",
    "block.norm_position": "post",
    "block.*": defaults_except("block", "norm_position"),
    "embed_norm": (None, True),
    "final_norm": (None, False),
    "type_vocab_size": 0,
    "layers": no_layer_overrides,
    "embedding.type": "token",
    "embedding.*": defaults_except("embedding", "padding_idx"),
    **CLASSIC_BLOCK,
    "positional.*": defaults_except("positional", "sinusoidal_init"),
    "norm.eps": EPS,
    "head": _fits_head,
}

DISTILBERT = Family(
    name="distilbert",
    model_type="distilbert",
    classes=tuple(HEADS),
    base_prefix="distilbert.",
    head_prefixes=("vocab_", "pre_classifier.", "classifier."),
    defaults=DEFAULTS,
    options=OPTIONS,
    rules=RULES,
    ignored=IGNORED,
    requirements=REQUIREMENTS,
    recipes=("distilbert-base",),
    unread={
        "qa_dropout": "the dropout of the question-answering head, which zoo does not import",
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: CLASSES[recipe.head.type],
)
