"""ERNIE 4.5 dense: Llama with interleaved RoPE and one use_bias for every linear layer."""

from __future__ import annotations

CONFIGS = {"ernie4_5": "Ernie4_5Config"}

CASES = {
    "ernie4_5-gqa-tied": {
        "family": "ernie4_5",
        "hf_class": "Ernie4_5ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=64,
            rope_theta=1000.0,
        ),
    },
    "ernie4_5-biased-untied": {
        "family": "ernie4_5",
        "hf_class": "Ernie4_5ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=3,
            head_dim=8,
            max_position_embeddings=64,
            use_bias=True,
            tie_word_embeddings=False,
        ),
    },
}

PUBLISHED = {
    "ernie-4.5-0.3b": (
        "Ernie4_5Config",
        {
            "architectures": ["Ernie4_5ForCausalLM"],
            "bos_token_id": 1,
            "eos_token_id": 2,
            "head_dim": 128,
            "hidden_act": "silu",
            "hidden_size": 1024,
            "intermediate_size": 3072,
            "max_position_embeddings": 131072,
            "model_type": "ernie4_5",
            "num_attention_heads": 16,
            "num_hidden_layers": 18,
            "num_key_value_heads": 2,
            "pad_token_id": 0,
            "rms_norm_eps": 1e-05,
            "rope_theta": 500000.0,
            "tie_word_embeddings": True,
            "use_bias": False,
            "vocab_size": 103424,
        },
    ),
}
