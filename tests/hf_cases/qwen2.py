"""Qwen2: q/k/v biases without an output bias; sliding-window layers from max_window_layers on, or as layer_types."""

from __future__ import annotations

CONFIGS = {"qwen2": "Qwen2Config"}

CASES = {
    "qwen2-gqa-tied": {
        "family": "qwen2",
        "hf_class": "Qwen2ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            tie_word_embeddings=True,
            rope_theta=1000000.0,
            sliding_window=4,  # not used: use_sliding_window is false
        ),
    },
    "qwen2-sliding-from-layer-1": {
        "family": "qwen2",
        "hf_class": "Qwen2ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=3,
            max_position_embeddings=64,
            use_sliding_window=True,
            sliding_window=4,  # shorter than the 12-token test sequence
            max_window_layers=1,  # layers 1 and 2 slide, layer 0 sees every key
            rms_norm_eps=1e-5,
        ),
    },
    "qwen2-layer-types-mha": {
        "family": "qwen2",
        "hf_class": "Qwen2ForCausalLM",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=3,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=64,
            use_sliding_window=True,
            sliding_window=5,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        ),
    },
}

QWEN2_TINY = {
    "attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": True, "o_bias": False},
    "positional.theta": 1000000.0,
}
ZOO_MODELS = {
    "qwen2-tiny": ("llama-tiny", QWEN2_TINY),
    "qwen2-tiny-sliding": (
        "llama-tiny",
        {
            **QWEN2_TINY,
            "layers": [
                {
                    "select": 1,
                    "attention": {**QWEN2_TINY["attention"], "window": 3},
                }
            ],
        },
    ),
}

PUBLISHED = {
    "qwen2.5-0.5b": (
        "Qwen2Config",
        {
            "architectures": ["Qwen2ForCausalLM"],
            "attention_dropout": 0.0,
            "bos_token_id": 151643,
            "eos_token_id": 151643,
            "hidden_act": "silu",
            "hidden_size": 896,
            "initializer_range": 0.02,
            "intermediate_size": 4864,
            "max_position_embeddings": 32768,
            "max_window_layers": 24,
            "model_type": "qwen2",
            "num_attention_heads": 14,
            "num_hidden_layers": 24,
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000.0,
            "sliding_window": 32768,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.40.1",
            "use_cache": True,
            "use_mrope": False,
            "use_sliding_window": False,
            "vocab_size": 151936,
        },
    ),
}
