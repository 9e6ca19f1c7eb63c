"""OLMo (v1): Llama with parameter-free LayerNorms, and projections clamped by clip_qkv."""

from __future__ import annotations

CONFIGS = {"olmo": "OlmoConfig"}

CASES = {
    "olmo-tied": {
        "family": "olmo",
        "hf_class": "OlmoForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=64,
            tie_word_embeddings=True,
            rope_theta=1000.0,
        ),
    },
    "olmo-gqa-biased-untied": {
        "family": "olmo",
        "hf_class": "OlmoForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=2,
            max_position_embeddings=64,
            attention_bias=True,
            clip_qkv=0.05,  # clamps a good share of the random projections
            pad_token_id=1,
        ),
    },
}

PUBLISHED = {
    "olmo-1b": (
        "OlmoConfig",
        {
            "architectures": ["OlmoForCausalLM"],
            "attention_bias": False,
            "clip_qkv": None,
            "eos_token_id": 50279,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "max_position_embeddings": 2048,
            "model_type": "olmo",
            "num_attention_heads": 16,
            "num_hidden_layers": 16,
            "num_key_value_heads": 16,
            "pad_token_id": 1,
            "rope_theta": 10000.0,
            "tie_word_embeddings": True,
            "vocab_size": 50304,
        },
    ),
}
