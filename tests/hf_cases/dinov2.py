"""DINOv2 and DINOv2 with registers: layer scale, the model's own position table, [CLS] beside the patches' mean
for the classifier; one case with SwiGLU, grayscale and no mask token, one with register tokens (left out of the
mean). The bare models (Dinov2Model, ...) are compared in tests/test_hf_vision.py (features, not logits)."""

from __future__ import annotations

KIND = "vision"

CONFIGS = {"dinov2": "Dinov2Config", "dinov2_with_registers": "Dinov2WithRegistersConfig"}

TINY = dict(image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=4)

CASES = {
    "dinov2-classifier": {
        "family": "dinov2",
        "hf_class": "Dinov2ForImageClassification",
        "config": dict(**TINY, num_labels=5, layerscale_value=0.5),
    },
    "dinov2-swiglu-gray-no-mask-token": {
        "family": "dinov2",
        "hf_class": "Dinov2ForImageClassification",
        "config": dict(
            image_size=12,
            patch_size=3,
            num_channels=1,
            hidden_size=48,
            num_hidden_layers=3,
            num_attention_heads=6,
            mlp_ratio=3,
            use_swiglu_ffn=True,
            use_mask_token=False,
            qkv_bias=False,
            layer_norm_eps=1e-5,
            layerscale_value=1e-5,
            drop_path_rate=0.1,
            num_labels=3,
        ),
    },
    "dinov2-registers-classifier": {
        "family": "dinov2_with_registers",
        "hf_class": "Dinov2WithRegistersForImageClassification",
        "config": dict(**TINY, num_register_tokens=3, num_labels=4, hidden_act="gelu_new"),
    },
    "dinov2-registers-swiglu": {
        "family": "dinov2_with_registers",
        "hf_class": "Dinov2WithRegistersForImageClassification",
        "config": dict(**TINY, num_register_tokens=1, use_swiglu_ffn=True, mlp_ratio=2, num_labels=2),
    },
}

ZOO_MODELS = {
    "dinov2-tiny": ("dinov2-tiny", {}),
    "dinov2-tiny-registers": (
        "dinov2-tiny",
        {
            "embedding.register_tokens": 2,
            "embedding.antialias": True,
            "head.prefix_tokens": 3,
            "hf_family": "dinov2_with_registers",
        },
    ),
}

PUBLISHED = {
    "dinov2-small": (
        "Dinov2Config",
        {
            "architectures": ["Dinov2Model"],
            "attention_probs_dropout_prob": 0.0,
            "drop_path_rate": 0.0,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.0,
            "hidden_size": 384,
            "image_size": 518,
            "initializer_range": 0.02,
            "layer_norm_eps": 1e-06,
            "layerscale_value": 1.0,
            "mlp_ratio": 4,
            "model_type": "dinov2",
            "num_attention_heads": 6,
            "num_channels": 3,
            "num_hidden_layers": 12,
            "patch_size": 14,
            "qkv_bias": True,
            "torch_dtype": "float32",
            "transformers_version": "4.31.0.dev0",
            "use_swiglu_ffn": False,
        },
    ),
    "dinov2-with-registers-small": (
        "Dinov2WithRegistersConfig",
        {
            "architectures": ["Dinov2WithRegistersModel"],
            "apply_layernorm": True,
            "attention_probs_dropout_prob": 0.0,
            "drop_path_rate": 0.0,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.0,
            "hidden_size": 384,
            "image_size": 518,
            "initializer_range": 0.02,
            "layer_norm_eps": 1e-06,
            "layerscale_value": 1.0,
            "mlp_ratio": 4,
            "model_type": "dinov2_with_registers",
            "num_attention_heads": 6,
            "num_channels": 3,
            "num_hidden_layers": 12,
            "num_register_tokens": 4,
            "out_features": ["stage12"],
            "out_indices": [12],
            "patch_size": 14,
            "qkv_bias": True,
            "reshape_hidden_states": True,
            "torch_dtype": "float32",
            "transformers_version": "4.48.0.dev0",
            "use_swiglu_ffn": False,
        },
    ),
}
