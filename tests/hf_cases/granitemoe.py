"""Granite-MoE: Granite's muP multipliers with a mixture of SwiGLU experts stacked on disk."""

from __future__ import annotations

CONFIGS = {"granitemoe": "GraniteMoeConfig"}

CASES = {
    "granitemoe-gqa-multipliers": {
        "family": "granitemoe",
        "hf_class": "GraniteMoeForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=24,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
            embedding_multiplier=12.0,
            residual_multiplier=0.22,
            attention_multiplier=0.015625,
            logits_scaling=6.0,
            max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
    },
    "granitemoe-mha-biased-tied-top1": {
        "family": "granitemoe",
        "hf_class": "GraniteMoeForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=16,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_local_experts=3,
            num_experts_per_tok=1,
            attention_bias=True,
            tie_word_embeddings=True,
            embedding_multiplier=2.0,
            residual_multiplier=0.5,
            attention_multiplier=0.2,
            logits_scaling=2.0,
            rms_norm_eps=1e-5,
            pad_token_id=3,
            max_position_embeddings=64,
        ),
    },
}

PUBLISHED = {
    "granite-3.0-1b-a400m": (
        "GraniteMoeConfig",
        {  # ibm-granite/granite-3.0-1b-a400m-base config.json
            "architectures": ["GraniteMoeForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.1,
            "attention_multiplier": 0.015625,
            "bos_token_id": 0,
            "embedding_multiplier": 12.0,
            "eos_token_id": 0,
            "hidden_act": "silu",
            "hidden_size": 1024,
            "initializer_range": 0.02,
            "intermediate_size": 512,
            "logits_scaling": 6.0,
            "max_position_embeddings": 4096,
            "model_type": "granitemoe",
            "num_attention_heads": 16,
            "num_experts_per_tok": 8,
            "num_hidden_layers": 24,
            "num_key_value_heads": 8,
            "num_local_experts": 32,
            "output_router_logits": False,
            "pad_token_id": 0,
            "residual_multiplier": 0.22,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 10000,
            "router_aux_loss_coef": 0.001,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.45.0.dev0",
            "use_cache": True,
            "vocab_size": 49155,
        },
    ),
}
