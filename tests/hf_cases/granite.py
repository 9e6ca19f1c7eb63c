"""Granite: Llama with an embedding multiplier, a residual multiplier, the attention's scale and a logit divisor."""

from __future__ import annotations

CONFIGS = {"granite": "GraniteConfig"}

CASES = {
    "granite-gqa-multipliers-tied": {
        "family": "granite",
        "hf_class": "GraniteForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            embedding_multiplier=12.0,
            residual_multiplier=0.22,
            attention_multiplier=0.125,  # 1 / head_dim, Granite's muP choice
            logits_scaling=8.0,
            tie_word_embeddings=True,
            rms_norm_eps=1e-5,
            pad_token_id=0,
        ),
    },
    "granite-defaults-biased-untied": {
        "family": "granite",
        "hf_class": "GraniteForCausalLM",
        "config": dict(  # every multiplier at GraniteConfig's 1.0: a softmax scale of 1, not 1/sqrt(head_dim)
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=6,
            max_position_embeddings=64,
            attention_bias=True,
            mlp_bias=True,
            rope_theta=1000.0,
        ),
    },
}

GRANITE_TINY = {
    "embedding": {"type": "token", "multiplier": 4.0},
    "block.residual_multiplier": 0.5,
    "head.logit_divisor": 2.0,
}

ZOO_MODELS = {
    "granite-tiny": ("llama-tiny", GRANITE_TINY),  # the attention's default scale is exported as attention_multiplier
    "granite-tiny-scaled-untied": (
        "llama-tiny",
        {**GRANITE_TINY, "attention.scale": 0.0625, "head.tie_embeddings": False},
    ),
}

PUBLISHED = {
    "granite-3.0-2b": (
        "GraniteConfig",
        {  # ibm-granite/granite-3.0-2b-base config.json
            "architectures": ["GraniteForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.1,
            "attention_multiplier": 0.015625,
            "bos_token_id": 0,
            "embedding_multiplier": 12.0,
            "eos_token_id": 0,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "initializer_range": 0.02,
            "intermediate_size": 8192,
            "logits_scaling": 8.0,
            "max_position_embeddings": 4096,
            "mlp_bias": False,
            "model_type": "granite",
            "num_attention_heads": 32,
            "num_hidden_layers": 40,
            "num_key_value_heads": 8,
            "pad_token_id": 0,
            "residual_multiplier": 0.22,
            "rms_norm_eps": 1e-05,
            "rope_scaling": None,
            "rope_theta": 10000.0,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.46.0.dev0",
            "use_cache": True,
            "vocab_size": 49155,
        },
    ),
}
