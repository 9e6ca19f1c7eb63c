"""OLMo 3: OLMo 2 with sliding layers (3 in 4) and a rope per kind of layer (a 4.x rope_scaling on full layers)."""

from __future__ import annotations

CONFIGS = {"olmo3": "Olmo3Config"}

CASES = {
    "olmo3-sliding-3-in-4": {
        "family": "olmo3",
        "hf_class": "Olmo3ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            sliding_window=4,
        ),
    },
    "olmo3-yarn-on-full-layers-tied": {
        "family": "olmo3",
        "hf_class": "Olmo3ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            max_position_embeddings=64,
            sliding_window=5,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            rope_theta=1000.0,
            rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8},
            attention_bias=True,
            tie_word_embeddings=True,
        ),
    },
}

PUBLISHED = {
    "olmo-3-7b": (
        "Olmo3Config",
        {
            "architectures": ["Olmo3ForCausalLM"],
            "attention_bias": False,
            "eos_token_id": 100257,
            "hidden_act": "silu",
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "max_position_embeddings": 65536,
            "model_type": "olmo3",
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 32,
            "pad_token_id": 100277,
            "rms_norm_eps": 1e-06,
            "rope_scaling": {
                "attention_factor": 1.2079441541679836,
                "beta_fast": 32,
                "beta_slow": 1,
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "yarn",
            },
            "rope_theta": 500000,
            "sliding_window": 4096,
            "tie_word_embeddings": False,
            "vocab_size": 100278,
        },
    ),
}
