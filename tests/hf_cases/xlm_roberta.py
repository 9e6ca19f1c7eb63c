"""XLM-RoBERTa: RoBERTa's cases (masked LMs tied and untied with another pad id, the classifiers, the bare model)
under its own model_type and classes, and xlm-roberta-base's published config."""

from __future__ import annotations

from .roberta import renamed

KIND = "encoder"
CONFIGS = {"xlm-roberta": "XLMRobertaConfig"}
CASES, PUBLISHED = renamed("xlm-roberta", "XLMRoberta", "xlm-roberta-base", "XLMRobertaConfig", 250002)
