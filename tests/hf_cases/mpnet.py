"""MPNet: learned positions numbered past token id 1 and T5's relative bias over the token indices; a tied masked
LM, an untied one with pad_token_id 0 (positions still skip id 1) and gelu_new blocks, the sequence and token
classifiers, the bare model's pooler; microsoft/mpnet-base's published config."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"mpnet": "MPNetConfig"}

TINY = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)

CASES = {
    "mpnet-mlm": {
        "family": "mpnet",
        "hf_class": "MPNetForMaskedLM",
        "config": dict(TINY, max_position_embeddings=34, layer_norm_eps=1e-5),
    },
    "mpnet-mlm-untied-pad-0": {
        "family": "mpnet",
        "hf_class": "MPNetForMaskedLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            num_hidden_layers=3,
            num_attention_heads=3,
            intermediate_size=80,
            max_position_embeddings=20,  # 18 positions: the padded batch's 12 tokens reach past the exact buckets
            pad_token_id=0,  # MPNet's code still numbers positions past token id 1
            hidden_act="gelu_new",  # the blocks' activation; lm_head applies the exact GELU regardless
            tie_word_embeddings=False,
        ),
    },
    "mpnet-classifier-3-labels": {
        "family": "mpnet",
        "hf_class": "MPNetForSequenceClassification",
        "config": dict(TINY, num_hidden_layers=1, max_position_embeddings=34, num_labels=3, hidden_dropout_prob=0.2),
    },
    "mpnet-token-classifier": {
        "family": "mpnet",
        "hf_class": "MPNetForTokenClassification",
        "config": dict(TINY, max_position_embeddings=30, num_labels=5),
    },
    "mpnet-model-pooler": {
        "family": "mpnet",
        "hf_class": "MPNetModel",
        "config": dict(TINY, max_position_embeddings=34),
    },
}

ZOO_MODELS = {
    "mpnet-tiny": ("mpnet-tiny", {}),
    "mpnet-tiny-classifier": ("mpnet-tiny", {"head": {"type": "classification", "pooler": True}, "num_classes": 4}),
}

MPNET_BASE = {
    "architectures": ["MPNetForMaskedLM"],
    "attention_probs_dropout_prob": 0.1,
    "bos_token_id": 0,
    "eos_token_id": 2,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 514,
    "model_type": "mpnet",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 1,
    "relative_attention_num_buckets": 32,
    "vocab_size": 30527,
}
"""microsoft/mpnet-base's config.json (all-mpnet-base-v2 was fine-tuned from it: the same network)."""

PUBLISHED = {"mpnet-base": ("MPNetConfig", MPNET_BASE)}
