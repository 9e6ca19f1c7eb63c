"""DeBERTa-v2/v3: the masked LM with v3's settings (shared keys, c2p and p2c, log buckets, a normalised table, no
token types) in both head layouts, a narrower token table, the sequence classifier with content-to-position only and
projections of its own, the token classifier with absolute positions, token types and unbucketed distances;
deberta-v3-base's published config."""

from __future__ import annotations

KIND = "encoder"
CONFIGS = {"deberta-v2": "DebertaV2Config"}

V3 = dict(
    relative_attention=True,
    position_buckets=8,
    norm_rel_ebd="layer_norm",
    share_att_key=True,
    pos_att_type=["p2c", "c2p"],
    layer_norm_eps=1e-7,
    max_relative_positions=-1,
    position_biased_input=False,
    type_vocab_size=0,
)
SMALL = dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
SMALL |= dict(max_position_embeddings=64)

CASES = {
    "deberta-v3-mlm": {"family": "deberta-v2", "hf_class": "DebertaV2ForMaskedLM", "config": {**SMALL, **V3}},
    "deberta-v3-mlm-narrow-table-gelu-new": {
        "family": "deberta-v2",
        "hf_class": "DebertaV2ForMaskedLM",
        "config": {**SMALL, **V3, "embedding_size": 24, "hidden_act": "gelu_new", "num_attention_heads": 2},
    },
    "deberta-v2-classifier-c2p-own-keys": {
        "family": "deberta-v2",
        "hf_class": "DebertaV2ForSequenceClassification",
        "config": {
            **SMALL,
            **V3,
            "pos_att_type": "c2p",
            "share_att_key": False,
            "num_labels": 3,
            "pooler_hidden_act": "tanh",
            "max_relative_positions": 20,
        },
    },
    "deberta-v2-token-classifier-absolute-p2c": {
        "family": "deberta-v2",
        "hf_class": "DebertaV2ForTokenClassification",
        "config": {
            **SMALL,
            **V3,
            "pos_att_type": ["p2c"],
            "share_att_key": False,
            "position_biased_input": True,
            "type_vocab_size": 2,
            "position_buckets": -1,
            "max_relative_positions": 6,
            "norm_rel_ebd": "none",
            "num_labels": 5,
            "hidden_act": "relu",
        },
    },
}

ZOO_MODELS = {
    "deberta-v3-tiny": ("deberta-v3-tiny", {}),
    "deberta-v3-tiny-classifier": (
        "deberta-v3-tiny",
        {
            "head": {"type": "classification", "pool": "cls", "pooler": True, "pooler_activation": "gelu"},
            "num_classes": 3,
        },
    ),
}

PUBLISHED = {
    "deberta-v3-base": (
        "DebertaV2Config",
        {
            "architectures": ["DebertaV2ForMaskedLM"],
            "model_type": "deberta-v2",
            "attention_probs_dropout_prob": 0.1,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "hidden_size": 768,
            "initializer_range": 0.02,
            "intermediate_size": 3072,
            "max_position_embeddings": 512,
            "relative_attention": True,
            "position_buckets": 256,
            "norm_rel_ebd": "layer_norm",
            "share_att_key": True,
            "pos_att_type": "p2c|c2p",
            "layer_norm_eps": 1e-7,
            "max_relative_positions": -1,
            "position_biased_input": False,
            "num_attention_heads": 12,
            "num_hidden_layers": 12,
            "type_vocab_size": 0,
            "vocab_size": 128100,
        },
    ),
}
