"""ERNIE: BERT's cases under ErnieForMaskedLM and the other classes, with and without use_task_id's task-type
table (task 0 added to every token), untied, with another activation; and ernie-3.0-base-zh's published config."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"ernie": "ErnieConfig"}

SMALL = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)

CASES = {
    "ernie-mlm-tasks": {
        "family": "ernie",
        "hf_class": "ErnieForMaskedLM",
        "config": dict(**SMALL, max_position_embeddings=40, type_vocab_size=4, use_task_id=True, layer_norm_eps=1e-5),
    },
    "ernie-mlm-untied-relu-no-tasks": {
        "family": "ernie",
        "hf_class": "ErnieForMaskedLM",
        "config": dict(**SMALL, max_position_embeddings=34, hidden_act="relu", tie_word_embeddings=False),
    },
    "ernie-classifier-5-tasks": {
        "family": "ernie",
        "hf_class": "ErnieForSequenceClassification",
        "config": dict(**SMALL, max_position_embeddings=34, use_task_id=True, task_type_vocab_size=5, num_labels=3),
    },
    "ernie-token-classifier": {
        "family": "ernie",
        "hf_class": "ErnieForTokenClassification",
        "config": dict(**SMALL, max_position_embeddings=30, use_task_id=True, num_labels=4),
    },
    "ernie-model-pooler": {
        "family": "ernie",
        "hf_class": "ErnieModel",
        "config": dict(**SMALL, max_position_embeddings=34, use_task_id=True, task_type_vocab_size=2),
    },
}

ZOO_MODELS = {
    "ernie-tiny": ("ernie-tiny", {}),
    "ernie-tiny-classifier": ("ernie-tiny", {"head": {"type": "classification", "pooler": True}, "num_classes": 3}),
}

PUBLISHED = {
    "ernie-3.0-base-zh": (
        "ErnieConfig",
        {
            "architectures": ["ErnieForMaskedLM"],
            "attention_probs_dropout_prob": 0.1,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "hidden_size": 768,
            "initializer_range": 0.02,
            "intermediate_size": 3072,
            "layer_norm_eps": 1e-05,
            "max_position_embeddings": 2048,
            "model_type": "ernie",
            "num_attention_heads": 12,
            "num_hidden_layers": 12,
            "pad_token_id": 0,
            "task_type_vocab_size": 3,
            "type_vocab_size": 4,
            "use_task_id": True,
            "vocab_size": 40000,
        },
    ),
}
