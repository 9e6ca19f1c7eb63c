"""Qwen3: per-head QK RMSNorm, head_dim apart from hidden_size / heads, one attention_bias, sliding layers."""

from __future__ import annotations

CONFIGS = {"qwen3": "Qwen3Config"}

CASES = {
    "qwen3-gqa-head-dim-tied": {
        "family": "qwen3",
        "hf_class": "Qwen3ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,  # 4 heads of 16 over a width of 32
            max_position_embeddings=128,
            tie_word_embeddings=True,
            rope_theta=1000000.0,
        ),
    },
    "qwen3-biased-sliding-untied": {
        "family": "qwen3",
        "hf_class": "Qwen3ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=3,
            head_dim=8,
            max_position_embeddings=64,
            attention_bias=True,
            use_sliding_window=True,
            sliding_window=4,  # shorter than the 12-token test sequence
            max_window_layers=2,  # layer 2 slides
            rms_norm_eps=1e-5,
        ),
    },
}

QWEN3_TINY = {
    "attention": {
        "type": "gqa",
        "num_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 32,
        "bias": False,
        "qk_norm": {"type": "rmsnorm", "eps": 1e-5},
    },
}
ZOO_MODELS = {
    "qwen3-tiny": ("llama-tiny", QWEN3_TINY),
    "qwen3-tiny-all-sliding-untied": (
        "llama-tiny",
        {**QWEN3_TINY, "attention.window": 3, "head.tie_embeddings": False},
    ),
}

PUBLISHED = {
    "qwen3-0.6b": (
        "Qwen3Config",
        {
            "architectures": ["Qwen3ForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "head_dim": 128,
            "hidden_act": "silu",
            "hidden_size": 1024,
            "initializer_range": 0.02,
            "intermediate_size": 3072,
            "max_position_embeddings": 40960,
            "max_window_layers": 28,
            "model_type": "qwen3",
            "num_attention_heads": 16,
            "num_hidden_layers": 28,
            "num_key_value_heads": 8,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 1000000,
            "sliding_window": None,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.51.0",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": 151936,
        },
    ),
}
