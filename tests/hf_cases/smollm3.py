"""SmolLM3: NoPE layers (every no_rope_layer_interval-th, or as no_rope_layers lists), sliding layers."""

from __future__ import annotations

CONFIGS = {"smollm3": "SmolLM3Config"}

CASES = {
    "smollm3-nope-every-2nd": {
        "family": "smollm3",
        "hf_class": "SmolLM3ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            no_rope_layer_interval=2,
            rope_theta=1000.0,
            pad_token_id=0,
        ),
    },
    "smollm3-listed-nope-sliding-untied": {
        "family": "smollm3",
        "hf_class": "SmolLM3ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=3,
            max_position_embeddings=64,
            no_rope_layers=[0, 1, 0],
            use_sliding_window=True,
            sliding_window=4,  # the NoPE layers slide (SmolLM3Config's rule)
            tie_word_embeddings=False,
            pad_token_id=0,
        ),
    },
}

PUBLISHED = {
    "smollm3-3b": (
        "SmolLM3Config",
        {
            "architectures": ["SmolLM3ForCausalLM"],
            "attention_bias": False,
            "bos_token_id": 128000,
            "eos_token_id": 128012,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "intermediate_size": 11008,
            "max_position_embeddings": 65536,
            "mlp_bias": False,
            "model_type": "smollm3",
            "no_rope_layer_interval": 4,
            "num_attention_heads": 16,
            "num_hidden_layers": 36,
            "num_key_value_heads": 4,
            "pad_token_id": 128004,
            "rms_norm_eps": 1e-06,
            "rope_theta": 5000000.0,
            "tie_word_embeddings": True,
            "use_sliding_window": False,
            "vocab_size": 128256,
        },
    ),
}
