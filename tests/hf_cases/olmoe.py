"""OLMoE: QK RMSNorm over whole projections, top-k softmax experts (renormalised or not), one attention_bias."""

from __future__ import annotations

CONFIGS = {"olmoe": "OlmoeConfig"}

CASES = {
    "olmoe-4x2": {
        "family": "olmoe",
        "hf_class": "OlmoeForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_experts=4,
            num_experts_per_tok=2,
            max_position_embeddings=128,
        ),
    },
    "olmoe-gqa-normed-biased-tied": {
        "family": "olmoe",
        "hf_class": "OlmoeForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=12,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=2,
            num_experts=6,
            num_experts_per_tok=3,
            norm_topk_prob=True,
            attention_bias=True,
            tie_word_embeddings=True,
            rms_norm_eps=1e-6,
            rope_theta=1000.0,
            pad_token_id=None,
            max_position_embeddings=64,
        ),
    },
}

OLMOE_TINY = {
    "extends": "llama-tiny",
    "name": "olmoe-tiny",
    "attention": {
        "type": "gqa",
        "num_heads": 4,
        "num_kv_heads": 2,
        "bias": False,
        "qk_norm": {"type": "rmsnorm", "eps": 1e-5},
        "qk_norm_scope": "projection",
    },
    "ffn": {
        "type": "moe",
        "num_experts": 4,
        "top_k": 2,
        "normalize": False,
        "expert": {"type": "swiglu", "hidden": 32},
    },
}

ZOO_MODELS = {"olmoe-tiny": (OLMOE_TINY, {})}

PUBLISHED = {
    "olmoe-1b-7b": (
        "OlmoeConfig",
        {  # allenai/OLMoE-1B-7B-0924 config.json
            "architectures": ["OlmoeForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "clip_qkv": None,
            "eos_token_id": 50279,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "initializer_range": 0.02,
            "intermediate_size": 1024,
            "max_position_embeddings": 4096,
            "model_type": "olmoe",
            "norm_topk_prob": False,
            "num_attention_heads": 16,
            "num_experts": 64,
            "num_experts_per_tok": 8,
            "num_hidden_layers": 16,
            "num_key_value_heads": 16,
            "output_router_logits": False,
            "pad_token_id": 1,
            "rms_norm_eps": 1e-05,
            "rope_scaling": None,
            "rope_theta": 10000.0,
            "router_aux_loss_coef": 0.01,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.43.0.dev0",
            "use_cache": True,
            "vocab_size": 50304,
        },
    ),
}
