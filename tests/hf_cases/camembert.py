"""Camembert: RoBERTa's network under its own model_type and classes: a masked LM (tied, and untied with a pad id
other than 1), a sequence and a token classifier, and the bare model."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"camembert": "CamembertConfig"}

CASES = {
    "camembert-mlm": {
        "family": "camembert",
        "hf_class": "CamembertForMaskedLM",
        "config": dict(
            vocab_size=80,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=34,
            type_vocab_size=1,
            layer_norm_eps=1e-5,
        ),
    },
    "camembert-mlm-untied-pad-2": {
        "family": "camembert",
        "hf_class": "CamembertForMaskedLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            num_hidden_layers=2,
            num_attention_heads=3,
            intermediate_size=80,
            max_position_embeddings=40,
            type_vocab_size=2,
            pad_token_id=2,
            tie_word_embeddings=False,
        ),
    },
    "camembert-classifier": {
        "family": "camembert",
        "hf_class": "CamembertForSequenceClassification",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=48,
            max_position_embeddings=34,
            type_vocab_size=1,
            num_labels=3,
        ),
    },
    "camembert-token-classifier": {
        "family": "camembert",
        "hf_class": "CamembertForTokenClassification",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=30,
            type_vocab_size=1,
            num_labels=5,
        ),
    },
    "camembert-model": {
        "family": "camembert",
        "hf_class": "CamembertModel",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=34,
            type_vocab_size=1,
        ),
    },
}

PUBLISHED = {
    "camembert-base": (
        "CamembertConfig",
        {
            "architectures": ["CamembertForMaskedLM"],
            "attention_probs_dropout_prob": 0.1,
            "bos_token_id": 5,
            "eos_token_id": 6,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "hidden_size": 768,
            "initializer_range": 0.02,
            "intermediate_size": 3072,
            "layer_norm_eps": 1e-05,
            "max_position_embeddings": 514,
            "model_type": "camembert",
            "num_attention_heads": 12,
            "num_hidden_layers": 12,
            "output_past": True,
            "pad_token_id": 1,
            "position_embedding_type": "absolute",
            "type_vocab_size": 1,
            "vocab_size": 32005,
        },
    ),
}
