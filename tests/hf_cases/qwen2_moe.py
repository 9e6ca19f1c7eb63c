"""Qwen2-MoE: top-k softmax weights kept as they are, a sigmoid-gated shared expert, dense layers by mlp_only_layers."""

from __future__ import annotations

CONFIGS = {"qwen2_moe": "Qwen2MoeConfig"}

CASES = {
    "qwen2-moe-4x2": {
        "family": "qwen2_moe",
        "hf_class": "Qwen2MoeForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=48,
            moe_intermediate_size=16,
            shared_expert_intermediate_size=24,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_experts=4,
            num_experts_per_tok=2,
            max_position_embeddings=128,
        ),
    },
    "qwen2-moe-dense-layer-normed-tied": {
        "family": "qwen2_moe",
        "hf_class": "Qwen2MoeForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=40,
            moe_intermediate_size=12,
            shared_expert_intermediate_size=20,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=3,
            num_experts=6,
            num_experts_per_tok=3,
            mlp_only_layers=[1],  # a dense SwiGLU between two MoE layers
            norm_topk_prob=True,
            qkv_bias=False,
            tie_word_embeddings=True,
            rms_norm_eps=1e-5,
            rope_theta=1000.0,
            max_position_embeddings=64,
        ),
    },
}

QWEN2_MOE_TINY = {
    "extends": "llama-tiny",
    "name": "qwen2-moe-tiny",
    "attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": True, "o_bias": False},
    "ffn": {
        "type": "moe",
        "num_experts": 4,
        "top_k": 2,
        "expert": {"type": "swiglu", "hidden": 32},
        "shared_expert": {"type": "swiglu", "hidden": 48},
        "shared_expert_gate": True,
        "normalize": False,
    },
    "num_layers": 3,
    "layers": [{"select": [0], "ffn": {"type": "swiglu", "hidden": 96}}],
}

ZOO_MODELS = {"qwen2-moe-tiny": (QWEN2_MOE_TINY, {})}

PUBLISHED = {
    "qwen1.5-moe-a2.7b": (
        "Qwen2MoeConfig",
        {  # Qwen/Qwen1.5-MoE-A2.7B config.json
            "architectures": ["Qwen2MoeForCausalLM"],
            "attention_dropout": 0.0,
            "bos_token_id": 151643,
            "eos_token_id": 151643,
            "decoder_sparse_step": 1,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "initializer_range": 0.02,
            "intermediate_size": 5632,
            "max_position_embeddings": 8192,
            "max_window_layers": 21,
            "model_type": "qwen2_moe",
            "moe_intermediate_size": 1408,
            "norm_topk_prob": False,
            "num_attention_heads": 16,
            "num_experts": 60,
            "num_experts_per_tok": 4,
            "num_hidden_layers": 24,
            "num_key_value_heads": 16,
            "output_router_logits": False,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000.0,
            "router_aux_loss_coef": 0.001,
            "shared_expert_intermediate_size": 5632,
            "sliding_window": 32768,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.39.0.dev0",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": 151936,
        },
    ),
}
