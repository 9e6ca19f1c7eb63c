"""DistilBERT: no token types, sinusoid-initialised or learned positions, its own head layout (masked LM tied
and untied, a ReLU pre-classifier, token classification), pad ids other than 0."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"distilbert": "DistilBertConfig"}

CASES = {
    "distilbert-mlm": {
        "family": "distilbert",
        "hf_class": "DistilBertForMaskedLM",
        "config": dict(vocab_size=96, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=32),
    },
    "distilbert-mlm-untied-sinusoidal-pad-5": {
        "family": "distilbert",
        "hf_class": "DistilBertForMaskedLM",
        "config": dict(
            vocab_size=80,
            dim=48,
            n_layers=3,
            n_heads=6,
            hidden_dim=72,
            max_position_embeddings=40,
            sinusoidal_pos_embds=True,
            activation="relu",  # in the blocks and the masked LM's vocab_transform
            tie_word_embeddings=False,
            pad_token_id=5,
        ),
    },
    "distilbert-classifier-4-labels-relu": {
        "family": "distilbert",
        "hf_class": "DistilBertForSequenceClassification",
        "config": dict(
            vocab_size=64,
            dim=32,
            n_layers=2,
            n_heads=2,
            hidden_dim=48,
            max_position_embeddings=24,
            activation="relu",
            num_labels=4,
            seq_classif_dropout=0.3,
        ),
    },
    "distilbert-token-classifier": {
        "family": "distilbert",
        "hf_class": "DistilBertForTokenClassification",
        "config": dict(
            vocab_size=64, dim=32, n_layers=1, n_heads=4, hidden_dim=48, max_position_embeddings=24, num_labels=6
        ),
    },
}

ZOO_MODELS = {
    "distilbert-tiny": ("distilbert-tiny", {}),
    "distilbert-tiny-classifier": (
        "distilbert-tiny",
        {"head": {"type": "classification", "pooler": True, "pooler_activation": "relu"}, "num_classes": 3},
    ),
    "distilbert-tiny-untied": ("distilbert-tiny", {"head": {"type": "mlm", "tie_embeddings": False}}),
}

PUBLISHED = {
    "distilbert-base": (
        "DistilBertConfig",
        {
            "activation": "gelu",
            "architectures": ["DistilBertForMaskedLM"],
            "attention_dropout": 0.1,
            "dim": 768,
            "dropout": 0.1,
            "hidden_dim": 3072,
            "initializer_range": 0.02,
            "max_position_embeddings": 512,
            "model_type": "distilbert",
            "n_heads": 12,
            "n_layers": 6,
            "pad_token_id": 0,
            "qa_dropout": 0.1,
            "seq_classif_dropout": 0.2,
            "sinusoidal_pos_embds": False,
            "tie_weights_": True,
            "transformers_version": "4.10.0.dev0",
            "vocab_size": 30522,
        },
    ),
}
