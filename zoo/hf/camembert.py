"""CamemBERT (``CamembertModel``, ``ForMaskedLM``, ``ForSequenceClassification``, ``ForTokenClassification``):
RoBERTa's network and weight names (``roberta.``, ``lm_head.``) under another ``model_type``, with a French
SentencePiece vocabulary of 32,005 tokens (camembert-base: 110M parameters)."""

from __future__ import annotations

from .roberta import ROBERTA, roberta_head
from .rows_classic import bert_classes, by_head, encoder_heads

HEADS = bert_classes("Camembert")
CLASSES = by_head(HEADS)

CAMEMBERT = ROBERTA.derive(
    "camembert",
    classes=tuple(HEADS),
    recipes=("camembert-base",),
    hf_class=lambda recipe: CLASSES[recipe.head.type],
    rows=(encoder_heads(HEADS, "lm_head.decoder.bias", roberta_head),),  # RoBERTa's heads, under these classes
    base_class="CamembertModel",
    defaults={"vocab_size": 30522},  # transformers' CamembertConfig default (BERT's), not the published 32005
)
