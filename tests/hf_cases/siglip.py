"""SigLIP: the two towers read at the text's final position (padding included) and pooled by attention on the image
side; a text head projecting to another image width (``projection_size``), other depths, activations, epsilons and a
grayscale tower; siglip-base-patch16-224's published config."""

from __future__ import annotations

KIND = "dual-encoder"
CONFIGS = {"siglip": "SiglipConfig"}

TEXT = dict(vocab_size=99, intermediate_size=37, num_attention_heads=4, max_position_embeddings=20, eos_token_id=98)

CASES = {
    "siglip-projection-size": {
        "family": "siglip",
        "hf_class": "SiglipModel",
        "config": dict(
            text_config=dict(**TEXT, hidden_size=32, num_hidden_layers=2, projection_size=24, pad_token_id=1),
            vision_config=dict(
                hidden_size=24, intermediate_size=30, num_attention_heads=4, image_size=16, patch_size=4
            ),
        ),
    },
    "siglip-gelu-quick-gelu-grayscale": {
        "family": "siglip",
        "hf_class": "SiglipModel",
        "config": dict(
            text_config=dict(**TEXT, hidden_size=16, num_hidden_layers=1, hidden_act="gelu", layer_norm_eps=1e-5),
            vision_config=dict(
                hidden_size=16,
                intermediate_size=20,
                num_attention_heads=2,
                num_hidden_layers=3,
                image_size=12,
                patch_size=3,
                num_channels=1,
                hidden_act="quick_gelu",
                layer_norm_eps=1e-5,
            ),
        ),
    },
}

ZOO_MODELS = {"siglip-tiny": ("siglip-tiny", {})}

PUBLISHED = {
    "siglip-base-patch16-224": (
        "SiglipConfig",
        {
            "architectures": ["SiglipModel"],
            "initializer_factor": 1.0,
            "model_type": "siglip",
            "text_config": {
                "hidden_size": 768,
                "intermediate_size": 3072,
                "max_position_embeddings": 64,
                "model_type": "siglip_text_model",
                "num_attention_heads": 12,
                "num_hidden_layers": 12,
                "vocab_size": 32000,
            },
            "vision_config": {
                "hidden_size": 768,
                "image_size": 224,
                "intermediate_size": 3072,
                "model_type": "siglip_vision_model",
                "num_attention_heads": 12,
                "num_hidden_layers": 12,
                "patch_size": 16,
            },
        },
    ),
}
