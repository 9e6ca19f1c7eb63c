"""XLM-RoBERTa (``XLMRobertaModel``, ``ForMaskedLM``, ...; xlm-roberta-base: a 250,002-token SentencePiece
vocabulary over 100 languages, 278M parameters): RoBERTa's network and weight names under its own classes."""

from .roberta import renamed_roberta

XLM_ROBERTA = renamed_roberta("xlm-roberta", "XLMRoberta", ("xlm-roberta-base",), vocab_size=30522)  # BERT's default
