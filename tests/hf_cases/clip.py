"""CLIP: the two towers and their projections, with the end-of-text token pooled by id (today's configs) and by the
largest id (the first checkpoints' ``eos_token_id: 2``), other widths, depths and activations in each tower, a
grayscale tower; clip-vit-base-patch32's published config."""

from __future__ import annotations

KIND = "dual-encoder"
CONFIGS = {"clip": "CLIPConfig"}

TEXT = dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_attention_heads=4, max_position_embeddings=20)
VISION = dict(hidden_size=24, intermediate_size=30, num_attention_heads=4, image_size=16, patch_size=4)

CASES = {
    "clip-eos-token": {
        "family": "clip",
        "hf_class": "CLIPModel",
        "config": dict(
            text_config=dict(**TEXT, num_hidden_layers=2, eos_token_id=98, bos_token_id=97, pad_token_id=1),
            vision_config=dict(**VISION, num_hidden_layers=2),
            projection_dim=12,
        ),
    },
    "clip-largest-id-gelu-grayscale": {
        "family": "clip",
        "hf_class": "CLIPModel",
        "config": dict(
            text_config=dict(**TEXT, num_hidden_layers=1, eos_token_id=2, hidden_act="gelu", layer_norm_eps=1e-6),
            vision_config=dict(**VISION, num_hidden_layers=3, num_channels=1, hidden_act="gelu_new"),
            projection_dim=16,
            logit_scale_init_value=1.5,
        ),
    },
}

ZOO_MODELS = {"clip-tiny": ("clip-tiny", {})}

PUBLISHED = {
    "clip-vit-base-patch32": (
        "CLIPConfig",
        {
            "architectures": ["CLIPModel"],
            "initializer_factor": 1.0,
            "logit_scale_init_value": 2.6592,
            "model_type": "clip",
            "projection_dim": 512,
            "text_config": {
                "attention_dropout": 0.0,
                "bos_token_id": 0,
                "dropout": 0.0,
                "eos_token_id": 2,
                "hidden_act": "quick_gelu",
                "hidden_size": 512,
                "initializer_factor": 1.0,
                "initializer_range": 0.02,
                "intermediate_size": 2048,
                "layer_norm_eps": 1e-05,
                "max_position_embeddings": 77,
                "model_type": "clip_text_model",
                "num_attention_heads": 8,
                "num_hidden_layers": 12,
                "pad_token_id": 1,
                "projection_dim": 512,
                "vocab_size": 49408,
            },
            "vision_config": {
                "attention_dropout": 0.0,
                "dropout": 0.0,
                "hidden_act": "quick_gelu",
                "hidden_size": 768,
                "image_size": 224,
                "initializer_factor": 1.0,
                "initializer_range": 0.02,
                "intermediate_size": 3072,
                "layer_norm_eps": 1e-05,
                "model_type": "clip_vision_model",
                "num_attention_heads": 12,
                "num_channels": 3,
                "num_hidden_layers": 12,
                "patch_size": 32,
                "projection_dim": 512,
            },
        },
    ),
}
