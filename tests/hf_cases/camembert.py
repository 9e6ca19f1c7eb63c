"""CamemBERT: RoBERTa's cases (masked LMs tied and untied with another pad id, the classifiers, the bare model)
under its own model_type and classes, and camembert-base's published config."""

from __future__ import annotations

from .roberta import renamed

KIND = "encoder"
CONFIGS = {"camembert": "CamembertConfig"}
CASES, PUBLISHED = renamed(
    "camembert", "Camembert", "camembert-base", "CamembertConfig", 32005, bos_token_id=5, eos_token_id=6
)
