"""Persimmon: q/k LayerNorms, half of each head rotated, ReLU²; and without q/k norms, a quarter rotated at another
base, a tied head and GELU."""

from __future__ import annotations

CONFIGS = {"persimmon": "PersimmonConfig"}

CASES = {
    "persimmon-qk-layernorm": {
        "family": "persimmon",
        "hf_class": "PersimmonForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=64,
            pad_token_id=0,
        ),
    },
    "persimmon-plain-tied-gelu": {
        "family": "persimmon",
        "hf_class": "PersimmonForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=3,
            max_position_embeddings=48,
            qk_layernorm=False,
            hidden_act="gelu",
            layer_norm_eps=1e-6,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.25},
        ),
    },
}

PUBLISHED = {
    "persimmon-8b-base": (
        "PersimmonConfig",
        {
            "architectures": ["PersimmonForCausalLM"],
            "bos_token_id": 71013,
            "eos_token_id": 71013,
            "hidden_act": "relu2",
            "hidden_dropout": 0.0,
            "attention_dropout": 0.0,
            "hidden_size": 4096,
            "initializer_range": 0.02,
            "intermediate_size": 16384,
            "layer_norm_eps": 1e-05,
            "max_position_embeddings": 16384,
            "model_type": "persimmon",
            "num_attention_heads": 64,
            "num_hidden_layers": 36,
            "partial_rotary_factor": 0.5,
            "qk_layernorm": True,
            "rope_scaling": None,
            "rope_theta": 25000.0,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.34.0.dev0",
            "use_cache": True,
            "vocab_size": 262144,
        },
    ),
}
