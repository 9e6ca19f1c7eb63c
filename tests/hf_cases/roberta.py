"""RoBERTa: positions numbered from the non-padding tokens and offset by pad_token_id + 1, one token type, an
untied masked LM, sequence and token classifiers, a pad id other than 1."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"roberta": "RobertaConfig"}

CASES = {
    "roberta-mlm": {
        "family": "roberta",
        "hf_class": "RobertaForMaskedLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=34,
            type_vocab_size=1,
            layer_norm_eps=1e-5,
        ),
    },
    "roberta-mlm-untied-pad-3": {
        "family": "roberta",
        "hf_class": "RobertaForMaskedLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            num_hidden_layers=2,
            num_attention_heads=3,
            intermediate_size=80,
            max_position_embeddings=40,
            type_vocab_size=2,
            pad_token_id=3,
            hidden_act="gelu_new",  # the blocks' activation; lm_head applies the exact GELU regardless
            tie_word_embeddings=False,
        ),
    },
    "roberta-classifier-3-labels": {
        "family": "roberta",
        "hf_class": "RobertaForSequenceClassification",
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
    "roberta-token-classifier-pad-0": {
        "family": "roberta",
        "hf_class": "RobertaForTokenClassification",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=30,
            type_vocab_size=1,
            pad_token_id=0,
            num_labels=7,
        ),
    },
    "roberta-model-pooler": {
        "family": "roberta",
        "hf_class": "RobertaModel",
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

ZOO_MODELS = {
    "roberta-tiny": ("roberta-tiny", {}),
    "roberta-tiny-classifier": ("roberta-tiny", {"head": {"type": "classification", "pooler": True}, "num_classes": 4}),
    "roberta-tiny-untied": ("roberta-tiny", {"head": {"type": "mlm", "tie_embeddings": False, "spare_bias": True}}),
}

PUBLISHED = {
    "roberta-base": (
        "RobertaConfig",
        {
            "architectures": ["RobertaForMaskedLM"],
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
            "model_type": "roberta",
            "num_attention_heads": 12,
            "num_hidden_layers": 12,
            "pad_token_id": 1,
            "type_vocab_size": 1,
            "vocab_size": 50265,
        },
    ),
}


def renamed(family: str, prefix: str, recipe: str, config: str, vocab_size: int, **published: object) -> tuple:
    """RoBERTa's cases and published config under another family's model_type and class prefix (XLM-RoBERTa,
    CamemBERT: the same network): ``(CASES, PUBLISHED)``."""
    cases = {
        name.replace("roberta", family, 1): {
            **case,
            "family": family,
            "hf_class": case["hf_class"].replace("Roberta", prefix, 1),
        }
        for name, case in CASES.items()
    }
    _, base = PUBLISHED["roberta-base"]
    config_json = {**base, "architectures": [f"{prefix}ForMaskedLM"], "model_type": family, "vocab_size": vocab_size}
    return cases, {recipe: (config, {**config_json, **published})}
