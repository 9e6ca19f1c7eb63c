"""EXAONE 4.0: output norms, per-head QK-norm, sliding RoPE layers beside full NoPE layers (or all full with RoPE)."""

from __future__ import annotations

CONFIGS = {"exaone4": "Exaone4Config"}

CASES = {
    "exaone4-hybrid-3-to-1": {
        "family": "exaone4",
        "hf_class": "Exaone4ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            max_position_embeddings=64,
            sliding_window=4,
            sliding_window_pattern=4,
            rope_theta=1000.0,
        ),
    },
    "exaone4-all-global-tied": {
        "family": "exaone4",
        "hf_class": "Exaone4ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=2,
            num_attention_heads=6,
            num_key_value_heads=3,
            max_position_embeddings=64,
            sliding_window=None,
            layer_types=["full_attention", "full_attention"],
            tie_word_embeddings=True,
        ),
    },
}

PUBLISHED = {
    "exaone-4.0-32b": (
        "Exaone4Config",
        {
            "architectures": ["Exaone4ForCausalLM"],
            "bos_token_id": 1,
            "eos_token_id": 361,
            "head_dim": 128,
            "hidden_act": "silu",
            "hidden_size": 5120,
            "intermediate_size": 27392,
            "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
            "max_position_embeddings": 131072,
            "model_type": "exaone4",
            "num_attention_heads": 40,
            "num_hidden_layers": 64,
            "num_key_value_heads": 8,
            "pad_token_id": 0,
            "rms_norm_eps": 1e-05,
            "rope_scaling": {
                "factor": 16.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "llama3",
            },
            "rope_theta": 1000000.0,
            "sliding_window": 4096,
            "sliding_window_pattern": "LLLG",
            "tie_word_embeddings": False,
            "vocab_size": 102400,
        },
    ),
}
PUBLISHED["exaone-4.0-32b"][1]["layer_types"] = PUBLISHED["exaone-4.0-32b"][1]["layer_types"] * 16
