"""Seed-OSS: Llama with separate bias flags for q/k/v and for the output projection."""

from __future__ import annotations

CONFIGS = {"seed_oss": "SeedOssConfig"}

CASES = {
    "seed-oss-qkv-bias": {
        "family": "seed_oss",
        "hf_class": "SeedOssForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=64,
            attention_dropout=0.0,
            residual_dropout=0.0,
            rope_theta=1000.0,
        ),
    },
    "seed-oss-out-bias-tied": {
        "family": "seed_oss",
        "hf_class": "SeedOssForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=3,
            head_dim=8,
            max_position_embeddings=64,
            attention_bias=False,
            attention_out_bias=True,
            mlp_bias=True,
            tie_word_embeddings=True,
            attention_dropout=0.0,
            residual_dropout=0.0,
        ),
    },
}

PUBLISHED = {
    "seed-oss-36b": (
        "SeedOssConfig",
        {
            "architectures": ["SeedOssForCausalLM"],
            "attention_bias": True,
            "attention_dropout": 0.1,
            "attention_out_bias": False,
            "bos_token_id": 0,
            "eos_token_id": 2,
            "head_dim": 128,
            "hidden_act": "silu",
            "hidden_size": 5120,
            "intermediate_size": 27648,
            "max_position_embeddings": 524288,
            "mlp_bias": False,
            "model_type": "seed_oss",
            "num_attention_heads": 80,
            "num_hidden_layers": 64,
            "num_key_value_heads": 8,
            "pad_token_id": 1,
            "residual_dropout": 0.1,
            "rms_norm_eps": 1e-06,
            "rope_theta": 10000000.0,
            "tie_word_embeddings": False,
            "vocab_size": 155136,
        },
    ),
}
