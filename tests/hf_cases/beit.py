"""BEiT: layer scale, a relative position bias per layer (or one the layers share), absolute positions on or off,
query and value biases without a key bias; the classifier on the patches' mean under a LayerNorm, or on the
final-normed [CLS]."""

from __future__ import annotations

KIND = "vision"

CONFIGS = {"beit": "BeitConfig"}

TINY = dict(image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=4)

CASES = {
    "beit-relative-mean-pooling": {
        "family": "beit",
        "hf_class": "BeitForImageClassification",
        "config": dict(**TINY, intermediate_size=64, use_relative_position_bias=True, num_labels=5),
    },
    "beit-shared-bias-absolute-cls-gray": {
        "family": "beit",
        "hf_class": "BeitForImageClassification",
        "config": dict(
            image_size=12,
            patch_size=3,
            num_channels=1,
            hidden_size=48,
            num_hidden_layers=3,
            num_attention_heads=6,
            intermediate_size=96,
            use_shared_relative_position_bias=True,
            use_absolute_position_embeddings=True,
            use_mean_pooling=False,
            use_mask_token=True,
            hidden_act="gelu_new",
            layer_norm_eps=1e-6,
            layer_scale_init_value=0.5,
            num_labels=3,
        ),
    },
    "beit-no-layer-scale-no-bias": {
        "family": "beit",
        "hf_class": "BeitForImageClassification",
        "config": dict(**TINY, intermediate_size=48, layer_scale_init_value=0.0, num_labels=2),
    },
}

ZOO_MODELS = {
    "beit-tiny": ("beit-tiny", {}),
    "beit-tiny-shared-absolute": (
        "beit-tiny",
        {"positional": {"type": "relative_2d"}, "attention.position_bias": None, "embedding.positions": True},
    ),
}

PUBLISHED = {
    "beit-base-patch16-224": (
        "BeitConfig",
        {
            "architectures": ["BeitForImageClassification"],
            "attention_probs_dropout_prob": 0.0,
            "drop_path_rate": 0.1,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.0,
            "hidden_size": 768,
            "image_size": 224,
            "initializer_range": 0.02,
            "intermediate_size": 3072,
            "layer_norm_eps": 1e-12,
            "layer_scale_init_value": 0.1,
            "model_type": "beit",
            "num_attention_heads": 12,
            "num_channels": 3,
            "num_hidden_layers": 12,
            "num_labels": 1000,  # the published file lists the 1000 ImageNet class names (id2label / label2id)
            "patch_size": 16,
            "use_absolute_position_embeddings": False,
            "use_mask_token": False,
            "use_mean_pooling": True,
            "use_relative_position_bias": True,
            "use_shared_relative_position_bias": False,
            "vocab_size": 8192,
        },
    ),
}
