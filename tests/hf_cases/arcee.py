"""Arcee: Llama with a ReLU² two-layer MLP (and its other activations, which zoo's MLP computes too)."""

from __future__ import annotations

CONFIGS = {"arcee": "ArceeConfig"}

CASES = {
    "arcee-relu2-gqa": {
        "family": "arcee",
        "hf_class": "ArceeForCausalLM",
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
    "arcee-gelu-biased-tied": {
        "family": "arcee",
        "hf_class": "ArceeForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=6,
            head_dim=8,
            max_position_embeddings=64,
            hidden_act="gelu",
            attention_bias=True,
            mlp_bias=True,
            tie_word_embeddings=True,
            rms_norm_eps=1e-6,
        ),
    },
}

PUBLISHED = {
    "afm-4.5b": (
        "ArceeConfig",
        {
            "architectures": ["ArceeForCausalLM"],
            "attention_bias": False,
            "head_dim": 128,
            "hidden_act": "relu2",
            "hidden_size": 2560,
            "intermediate_size": 18432,
            "max_position_embeddings": 65536,
            "mlp_bias": False,
            "model_type": "arcee",
            "num_attention_heads": 20,
            "num_hidden_layers": 36,
            "num_key_value_heads": 4,
            "rms_norm_eps": 1e-05,
            "rope_theta": 10000.0,
            "tie_word_embeddings": False,
            "vocab_size": 128004,
        },
    ),
}
