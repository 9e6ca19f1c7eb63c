"""XLM-RoBERTa (``XLMRobertaModel``, ``ForMaskedLM``, ...; xlm-roberta-base: a 250,002-token SentencePiece
vocabulary over 100 languages, 278M parameters): RoBERTa's network and weight names under its own classes."""

from .roberta import ROBERTA, heads
from .rows_encoder import renamed_encoder

XLM_ROBERTA = renamed_encoder(
    ROBERTA,
    heads,
    "xlm-roberta",
    "XLMRoberta",
    recipes=("xlm-roberta-base",),
    defaults={"vocab_size": 30522},  # BERT's default
)
