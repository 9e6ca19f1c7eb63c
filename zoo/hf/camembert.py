"""CamemBERT (``CamembertModel``, ``ForMaskedLM``, ...; camembert-base: 32,005 French tokens, 110M parameters):
RoBERTa's network and weight names under its own classes."""

from .roberta import renamed_roberta

CAMEMBERT = renamed_roberta("camembert", "Camembert", ("camembert-base",), vocab_size=30522)  # BERT's default
