"""Apertus: per-head QK-norm, one attention_bias, a two-layer MLP with the learned xIELU activation."""

from __future__ import annotations

CONFIGS = {"apertus": "ApertusConfig"}

CASES = {
    "apertus-xielu-gqa": {
        "family": "apertus",
        "hf_class": "ApertusForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            rope_theta=1000.0,
        ),
    },
    "apertus-biased-relu2-tied": {
        "family": "apertus",
        "hf_class": "ApertusForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=6,
            max_position_embeddings=64,
            hidden_act="relu2",
            attention_bias=True,
            tie_word_embeddings=True,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 500.0,
                "factor": 8.0,
                "original_max_position_embeddings": 16,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
            },
        ),
    },
}

PUBLISHED = {
    "apertus-8b": (
        "ApertusConfig",
        {
            "architectures": ["ApertusForCausalLM"],
            "attention_bias": False,
            "bos_token_id": 1,
            "eos_token_id": 68,
            "hidden_act": "xielu",
            "hidden_size": 4096,
            "intermediate_size": 21504,
            "max_position_embeddings": 65536,
            "model_type": "apertus",
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 8,
            "pad_token_id": 3,
            "rms_norm_eps": 1e-05,
            "rope_scaling": {
                "factor": 8.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "llama3",
            },
            "rope_theta": 12000000.0,
            "tie_word_embeddings": False,
            "vocab_size": 131072,
        },
    ),
}
