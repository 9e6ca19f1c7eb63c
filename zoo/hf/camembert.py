"""CamemBERT (``CamembertModel``, ``ForMaskedLM``, ...; camembert-base: 32,005 French tokens, 110M parameters):
RoBERTa's network and weight names under its own classes."""

from .roberta import ROBERTA, heads
from .rows_encoder import renamed_encoder

CAMEMBERT = renamed_encoder(
    ROBERTA,
    heads,
    "camembert",
    "Camembert",
    recipes=("camembert-base",),
    defaults={"vocab_size": 30522},  # BERT's default
)
