"""XLM-RoBERTa (``XLMRobertaModel``, ``ForMaskedLM``, ``ForSequenceClassification``, ``ForTokenClassification``):
RoBERTa's network and weight names (``roberta.``, ``lm_head.``) under another ``model_type``, with a 250,002-token
SentencePiece vocabulary (xlm-roberta-base: 278M parameters)."""

from __future__ import annotations

from .roberta import ROBERTA, roberta_head
from .rows_classic import bert_classes, by_head, encoder_heads

HEADS = bert_classes("XLMRoberta")
CLASSES = by_head(HEADS)

XLM_ROBERTA = ROBERTA.derive(
    "xlm-roberta",
    classes=tuple(HEADS),
    recipes=("xlm-roberta-base",),
    hf_class=lambda recipe: CLASSES[recipe.head.type],
    rows=(encoder_heads(HEADS, "lm_head.decoder.bias", roberta_head),),  # RoBERTa's heads, under these classes
    base_class="XLMRobertaModel",
    defaults={"vocab_size": 30522},  # transformers' XLMRobertaConfig default (BERT's), not the published 250002
)
