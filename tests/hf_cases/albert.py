"""ALBERT: cross-layer sharing (one group, two groups of two layers, every layer its own), the factorized embedding
narrower and wider than the blocks, the masked LM tied and untied, the bare model's pooler and the classifiers;
albert-base-v2's published config."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"albert": "AlbertConfig"}

SMALL = dict(vocab_size=96, max_position_embeddings=40, num_attention_heads=4, intermediate_size=48)

CASES = {
    "albert-mlm-one-group": {
        "family": "albert",
        "hf_class": "AlbertForMaskedLM",
        "config": dict(**SMALL, num_hidden_layers=3, embedding_size=16, hidden_size=32),
    },
    "albert-mlm-two-groups-untied-relu": {
        "family": "albert",
        "hf_class": "AlbertForMaskedLM",
        "config": dict(
            **SMALL,
            num_hidden_layers=4,
            num_hidden_groups=2,
            embedding_size=48,
            hidden_size=32,
            hidden_act="relu",
            tie_word_embeddings=False,
            layer_norm_eps=1e-5,
        ),
    },
    "albert-model-every-layer-its-own": {
        "family": "albert",
        "hf_class": "AlbertModel",
        "config": dict(**SMALL, num_hidden_layers=2, num_hidden_groups=2, embedding_size=16, hidden_size=32),
    },
    "albert-classifier": {
        "family": "albert",
        "hf_class": "AlbertForSequenceClassification",
        "config": dict(**SMALL, num_hidden_layers=2, embedding_size=32, hidden_size=32, num_labels=3),
    },
    "albert-token-classifier-pad-1": {
        "family": "albert",
        "hf_class": "AlbertForTokenClassification",
        "config": dict(**SMALL, num_hidden_layers=2, embedding_size=16, hidden_size=32, num_labels=5, pad_token_id=1),
    },
}

ZOO_MODELS = {"albert-tiny": ("albert-tiny", {})}

PUBLISHED = {
    "albert-base-v2": (
        "AlbertConfig",
        {
            "architectures": ["AlbertForMaskedLM"],
            "attention_probs_dropout_prob": 0,
            "bos_token_id": 2,
            "classifier_dropout_prob": 0.1,
            "down_scale_factor": 1,
            "embedding_size": 128,
            "eos_token_id": 3,
            "gap_size": 0,
            "hidden_act": "gelu_new",
            "hidden_dropout_prob": 0,
            "hidden_size": 768,
            "initializer_range": 0.02,
            "inner_group_num": 1,
            "intermediate_size": 3072,
            "layer_norm_eps": 1e-12,
            "max_position_embeddings": 512,
            "model_type": "albert",
            "net_structure_type": 0,
            "num_attention_heads": 12,
            "num_hidden_groups": 1,
            "num_hidden_layers": 12,
            "num_memory_blocks": 0,
            "pad_token_id": 0,
            "type_vocab_size": 2,
            "vocab_size": 30000,
        },
    ),
}
