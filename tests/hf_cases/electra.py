"""ELECTRA: the discriminator (replaced-token detection) and the generator (a masked LM narrowing to the
embedding's width, tied or not), factorized embeddings narrower and wider than the blocks and none, the classifiers
(a GELU pooler on [CLS]); electra-base's published discriminator and generator configs."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"electra": "ElectraConfig"}

SMALL = dict(vocab_size=96, num_hidden_layers=2, max_position_embeddings=40)

CASES = {
    "electra-discriminator-factorized": {
        "family": "electra",
        "hf_class": "ElectraForPreTraining",
        "config": dict(**SMALL, embedding_size=16, hidden_size=32, num_attention_heads=4, intermediate_size=64),
    },
    "electra-generator-wider-embedding": {
        "family": "electra",
        "hf_class": "ElectraForMaskedLM",
        "config": dict(**SMALL, embedding_size=48, hidden_size=32, num_attention_heads=2, intermediate_size=64),
    },
    "electra-generator-untied-relu": {
        "family": "electra",
        "hf_class": "ElectraForMaskedLM",
        "config": dict(
            **SMALL,
            embedding_size=16,
            hidden_size=32,
            num_attention_heads=4,
            intermediate_size=48,
            hidden_act="relu",
            tie_word_embeddings=False,
            layer_norm_eps=1e-5,
        ),
    },
    "electra-classifier-unfactorized": {
        "family": "electra",
        "hf_class": "ElectraForSequenceClassification",
        "config": dict(
            **SMALL, embedding_size=32, hidden_size=32, num_attention_heads=4, intermediate_size=64, num_labels=3
        ),
    },
    "electra-token-classifier-pad-1": {
        "family": "electra",
        "hf_class": "ElectraForTokenClassification",
        "config": dict(
            **SMALL,
            embedding_size=16,
            hidden_size=32,
            num_attention_heads=4,
            intermediate_size=64,
            num_labels=5,
            pad_token_id=1,
        ),
    },
}

ZOO_MODELS = {
    "electra-tiny": ("electra-tiny", {}),
    "electra-tiny-generator": (
        "electra-tiny",
        {"head": {"type": "mlm", "tie_embeddings": True, "eps": 1.0e-12}, "hf_family": "electra"},
    ),
}

BASE = {
    "attention_probs_dropout_prob": 0.1,
    "embedding_size": 768,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "electra",
    "num_hidden_layers": 12,
    "summary_activation": "gelu",
    "summary_last_dropout": 0.1,
    "summary_type": "first",
    "summary_use_proj": True,
    "type_vocab_size": 2,
    "vocab_size": 30522,
}

PUBLISHED = {
    "electra-base-discriminator": (
        "ElectraConfig",
        {
            **BASE,
            "architectures": ["ElectraForPreTraining"],
            "hidden_size": 768,
            "intermediate_size": 3072,
            "num_attention_heads": 12,
        },
    ),
    "electra-base-generator": (
        "ElectraConfig",
        {
            **BASE,
            "architectures": ["ElectraForMaskedLM"],
            "hidden_size": 256,
            "intermediate_size": 1024,
            "num_attention_heads": 4,
        },
    ),
}
