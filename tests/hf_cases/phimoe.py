"""PhiMoE: Mixtral with LayerNorms, biased attention and LM head, the sparsemixer router (two picks, each weighted
among the experts near it) and transformers' LongRoPE (the short factors at every length, scaled by the mscale)."""

from __future__ import annotations

CONFIGS = {"phimoe": "PhimoeConfig"}

CASES = {
    "phimoe-biased-sparsemixer": {  # a wide threshold: each pick's softmax spans several experts
        "family": "phimoe",
        "hf_class": "PhimoeForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=24,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_local_experts=4,
            router_jitter_noise=0.3,
            attention_bias=True,
            lm_head_bias=True,
            max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
        ),
    },
    "phimoe-longrope-sliding-tied": {  # past 8 positions transformers keeps the short factors; a window of 5
        "family": "phimoe",
        "hf_class": "PhimoeForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=16,
            num_hidden_layers=2,
            num_attention_heads=6,
            num_key_value_heads=2,
            num_local_experts=3,
            sliding_window=5,
            tie_word_embeddings=True,
            rms_norm_eps=1e-6,
            pad_token_id=3,
            max_position_embeddings=64,
            rope_parameters={
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "short_factor": [1.0, 1.5, 2.0, 3.0],
                "long_factor": [2.0, 4.0, 8.0, 16.0],
                "short_mscale": 1.2,
                "long_mscale": 1.2,
                "original_max_position_embeddings": 8,
            },
        ),
    },
}

PUBLISHED = {
    "phi-3.5-moe": (  # microsoft/Phi-3.5-MoE-instruct's config.json, without its rope_scaling (see the recipe)
        "PhimoeConfig",
        {
            "architectures": ["PhiMoEForCausalLM"],
            "attention_bias": True,
            "attention_dropout": 0.0,
            "bos_token_id": 1,
            "eos_token_id": 32000,
            "hidden_act": "silu",
            "hidden_size": 4096,
            "initializer_range": 0.02,
            "input_jitter_noise": 0.01,
            "intermediate_size": 6400,
            "lm_head_bias": True,
            "max_position_embeddings": 131072,
            "model_type": "phimoe",
            "num_attention_heads": 32,
            "num_experts_per_tok": 2,
            "num_hidden_layers": 32,
            "num_key_value_heads": 8,
            "num_local_experts": 16,
            "original_max_position_embeddings": 4096,
            "output_router_logits": False,
            "rms_norm_eps": 1e-05,
            "rope_theta": 10000.0,
            "router_aux_loss_coef": 0.0,
            "router_jitter_noise": 0.01,
            "sliding_window": 131072,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_cache": True,
            "vocab_size": 32064,
        },
    ),
}
