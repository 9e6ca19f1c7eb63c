"""DeiT: ViT with a distillation token beside [CLS]; the teacher model averages two classifiers, the plain
classifier reads [CLS] alone; grayscale images, GELU-tanh, several labels."""

from __future__ import annotations

KIND = "vision"

CONFIGS = {"deit": "DeiTConfig"}

CASES = {
    "deit-distilled-rgb": {
        "family": "deit",
        "hf_class": "DeiTForImageClassificationWithTeacher",
        "config": dict(
            image_size=16,
            patch_size=4,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            num_labels=5,
        ),
    },
    "deit-classifier-gray-7-labels": {
        "family": "deit",
        "hf_class": "DeiTForImageClassification",
        "config": dict(
            image_size=12,
            patch_size=3,
            num_channels=1,
            hidden_size=48,
            num_hidden_layers=3,
            num_attention_heads=6,
            intermediate_size=96,
            hidden_act="gelu_new",
            layer_norm_eps=1e-6,
            num_labels=7,
        ),
    },
}

ZOO_MODELS = {
    "deit-tiny": ("deit-tiny", {}),
    "deit-tiny-single-head-3-classes": ("deit-tiny", {"head.distillation": False, "num_classes": 3}),
}

PUBLISHED = {
    "deit-small-distilled": (
        "DeiTConfig",
        {
            "architectures": ["DeiTForImageClassificationWithTeacher"],
            "attention_probs_dropout_prob": 0.0,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.0,
            "hidden_size": 384,
            "image_size": 224,
            "initializer_range": 0.02,
            "intermediate_size": 1536,
            "layer_norm_eps": 1e-12,
            "model_type": "deit",
            "num_attention_heads": 6,
            "num_channels": 3,
            "num_hidden_layers": 12,
            "num_labels": 1000,  # the published file lists the 1000 ImageNet class names (id2label / label2id)
            "patch_size": 16,
            "qkv_bias": True,
            "torch_dtype": "float32",
            "transformers_version": "4.13.0.dev0",
        },
    ),
}
