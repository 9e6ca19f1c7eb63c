"""RoBERTa (``RobertaModel``, ``ForMaskedLM``, ``ForSequenceClassification``, ``ForTokenClassification``): BERT's
network with fairseq's positions (``past_pad``: a table of ``max_position_embeddings`` rows holds
``max_position_embeddings - pad_token_id - 1`` positions, ``max_len``; roberta-base: 514 rows, 512 positions) and its
own head names. Its ``lm_head`` always applies the exact GELU; its sequence classifier pools the first token."""

from __future__ import annotations

from typing import Any

from ._common import rename
from .bert import BERT, fits_head
from .mapping import Family
from .rows_classic import CLASSIFIERS, bert_body, bert_classes, by_head, encoder_heads, mlm_rules, no_spares, past_pad

HEADS = bert_classes("Roberta")
CLASSES = by_head(HEADS)


def roberta_head(recipe: Any) -> str | None:
    """A requirement: BERT's heads, but the masked LM's lm_head applies the exact GELU whatever hidden_act says."""
    head = recipe.head
    spares = no_spares(head)
    if spares or head.type != "mlm":
        return spares or fits_head(recipe)
    if head.activation != "gelu" or not (head.transform_bias and head.norm_bias and head.bias):
        return "head.activation must be 'gelu' and its biases on (RoBERTa's lm_head)"
    if recipe.norm.type == "layernorm" and head.eps != recipe.norm.eps:
        return f"head.eps is {head.eps}, needs norm.eps ({recipe.norm.eps}) (HF shares layer_norm_eps)"
    if head.spare_bias == head.tie_embeddings:
        return f"head.spare_bias is {head.spare_bias}, needs {not head.tie_embeddings} (as BERT's)"
    return None


ROBERTA = BERT.derive(
    "roberta",
    classes=tuple(HEADS),
    rules=(
        *bert_body("roberta"),
        *mlm_rules("lm_head.dense", "lm_head.layer_norm", "lm_head.decoder", "lm_head.bias"),
        *CLASSIFIERS,
    ),
    # BERT's but the next-sentence head's: buffers, the tied decoder, the pooler (which the heads have not)
    ignored=tuple(rename(name, {"bert.": "roberta.", "cls.predictions.": "lm_head."}) for name in BERT.ignored[:6]),
    base_prefix="roberta.",
    head_prefixes=("lm_head.", "classifier."),
    recipes=("roberta-base",),
    hf_class=lambda recipe: CLASSES[recipe.head.type],
    base_class="RobertaModel",
    drop=("max_position_embeddings",),
    rows=(
        encoder_heads(HEADS, "lm_head.decoder.bias", roberta_head),
        past_pad("RoBERTa", max_position_embeddings=512),
    ),
    defaults={"vocab_size": 50265, "pad_token_id": 1},
)


def renamed_roberta(model_type: str, prefix: str, recipes: tuple[str, ...], vocab_size: int) -> Family:
    """A family that is RoBERTa's network and weight names (``roberta.``, ``lm_head.``) under another ``model_type``
    and class ``prefix`` (XLM-RoBERTa's, CamemBERT's); ``vocab_size``: its config class's default."""
    heads = bert_classes(prefix)
    classes = by_head(heads)
    return ROBERTA.derive(
        model_type,
        classes=tuple(heads),
        recipes=recipes,
        hf_class=lambda recipe: classes[recipe.head.type],
        rows=(encoder_heads(heads, "lm_head.decoder.bias", roberta_head),),  # RoBERTa's heads, under these classes
        base_class=f"{prefix}Model",
        defaults={"vocab_size": vocab_size},
    )
