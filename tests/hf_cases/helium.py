"""Helium: Llama with interleaved RoPE and q/k/v biases without an output bias."""

from __future__ import annotations

CONFIGS = {"helium": "HeliumConfig"}

CASES = {
    "helium-gqa-biased": {
        "family": "helium",
        "hf_class": "HeliumForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=64,
            attention_bias=True,
            rope_theta=1000.0,
            pad_token_id=3,
        ),
    },
    "helium-mha-tied-mlp-bias": {
        "family": "helium",
        "hf_class": "HeliumForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=6,
            head_dim=8,
            max_position_embeddings=64,
            mlp_bias=True,
            tie_word_embeddings=True,
            rms_norm_eps=1e-6,
        ),
    },
}

PUBLISHED = {
    "helium-1-2b": (
        "HeliumConfig",
        {
            "architectures": ["HeliumForCausalLM"],
            "attention_bias": False,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "head_dim": 128,
            "hidden_act": "silu",
            "hidden_size": 2560,
            "intermediate_size": 7040,
            "max_position_embeddings": 4096,
            "mlp_bias": False,
            "model_type": "helium",
            "num_attention_heads": 20,
            "num_hidden_layers": 24,
            "num_key_value_heads": 20,
            "pad_token_id": 3,
            "rms_norm_eps": 1e-08,
            "rope_theta": 100000.0,
            "tie_word_embeddings": False,
            "vocab_size": 48000,
        },
    ),
}
