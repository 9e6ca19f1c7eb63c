"""ModernBERT: global and local layers with two rotary bases and a sliding window, GeGLU, no biases (or all of
them), a final norm, its prediction head before the masked LM, the sequence classifier ([CLS] or mean pooled)
and the token classifier."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"modernbert": "ModernBertConfig"}

SMALL = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)

CASES = {
    "modernbert-mlm-local-global": {
        "family": "modernbert",
        "hf_class": "ModernBertForMaskedLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=4,  # global, local, local, global
            num_attention_heads=4,
            max_position_embeddings=64,
            local_attention=4,  # each local query sees keys at most 2 away
            **SMALL,
        ),
    },
    "modernbert-mlm-untied-biased-tanh-thetas": {
        "family": "modernbert",
        "hf_class": "ModernBertForMaskedLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=40,
            num_hidden_layers=3,
            num_attention_heads=3,
            max_position_embeddings=32,
            local_attention=6,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 500.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
            },
            hidden_activation="gelu_pytorch_tanh",
            attention_bias=True,
            mlp_bias=True,
            norm_bias=True,
            classifier_bias=True,
            decoder_bias=False,
            norm_eps=1e-6,
            tie_word_embeddings=False,
            **{**SMALL, "pad_token_id": 3},
        ),
    },
    "modernbert-classifier-mean-5-labels": {
        "family": "modernbert",
        "hf_class": "ModernBertForSequenceClassification",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=40,
            num_hidden_layers=3,
            num_attention_heads=2,
            max_position_embeddings=32,
            local_attention=4,
            classifier_pooling="mean",
            num_labels=5,
            **SMALL,
        ),
    },
    "modernbert-token-classifier": {
        "family": "modernbert",
        "hf_class": "ModernBertForTokenClassification",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=40,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=32,
            local_attention=8,
            classifier_activation="relu",
            num_labels=3,
            **SMALL,
        ),
    },
}

ZOO_MODELS = {
    "modernbert-tiny": ("modernbert-tiny", {}),
    "modernbert-tiny-classifier": (
        "modernbert-tiny",
        {
            "head": {"type": "classification", "pooler": True, "pooler_activation": "gelu", "pooler_bias": False}
            | {"pooler_norm": True, "norm_bias": False, "pool": "mean"},
            "num_classes": 3,
        },
    ),
}

PUBLISHED = {
    "modernbert-base": (
        "ModernBertConfig",
        {
            "architectures": ["ModernBertForMaskedLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 50281,
            "classifier_activation": "gelu",
            "classifier_bias": False,
            "classifier_dropout": 0.0,
            "classifier_pooling": "mean",
            "cls_token_id": 50281,
            "decoder_bias": True,
            "deterministic_flash_attn": False,
            "embedding_dropout": 0.0,
            "eos_token_id": 50282,
            "global_attn_every_n_layers": 3,
            "global_rope_theta": 160000.0,
            "gradient_checkpointing": False,
            "hidden_activation": "gelu",
            "hidden_size": 768,
            "initializer_cutoff_factor": 2.0,
            "initializer_range": 0.02,
            "intermediate_size": 1152,
            "layer_norm_eps": 1e-05,
            "local_attention": 128,
            "local_rope_theta": 10000.0,
            "max_position_embeddings": 8192,
            "mlp_bias": False,
            "mlp_dropout": 0.0,
            "model_type": "modernbert",
            "norm_bias": False,
            "norm_eps": 1e-05,
            "num_attention_heads": 12,
            "num_hidden_layers": 22,
            "pad_token_id": 50283,
            "position_embedding_type": "absolute",
            "sep_token_id": 50282,
            "tie_word_embeddings": True,
            "torch_dtype": "float32",
            "transformers_version": "4.47.0.dev0",
            "vocab_size": 50368,
        },
    ),
}
