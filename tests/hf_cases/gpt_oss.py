"""gpt-oss: attention sinks, biased q/k/v/o, sliding layers from layer_types, a biased router over biased experts
with a clamped SwiGLU, fused on disk."""

from __future__ import annotations

CONFIGS = {"gpt_oss": "GptOssConfig"}

CASES = {
    "gpt-oss-gqa-sliding-clamped": {  # alternate layers slide over 4 keys; the clamp at 0.05 is hit
        "family": "gpt_oss",
        "hf_class": "GptOssForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=24,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=12,  # not hidden_size / heads
            num_local_experts=4,
            num_experts_per_tok=2,
            sliding_window=4,
            swiglu_limit=0.05,
            max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
        ),
    },
    "gpt-oss-mha-tied-unbiased": {
        "family": "gpt_oss",
        "hf_class": "GptOssForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=40,
            num_hidden_layers=2,
            num_attention_heads=6,
            num_key_value_heads=6,
            head_dim=8,
            num_local_experts=3,
            num_experts_per_tok=2,
            layer_types=["full_attention", "sliding_attention"],
            sliding_window=3,
            attention_bias=False,
            swiglu_alpha=1.0,
            swiglu_limit=0.1,
            router_aux_loss_coef=0.02,
            tie_word_embeddings=True,
            pad_token_id=3,
            rms_norm_eps=1e-6,
            max_position_embeddings=64,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
    },
    "gpt-oss-yarn-mqa": {
        "family": "gpt_oss",
        "hf_class": "GptOssForCausalLM",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=8,
            num_local_experts=2,
            num_experts_per_tok=1,
            sliding_window=6,
            swiglu_limit=0.05,
            max_position_embeddings=256,
            rope_parameters={  # the published YaRN at a context the 12-token tests pass the original of
                "rope_type": "yarn",
                "rope_theta": 1000.0,
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 8,
            },
        ),
    },
}


def published(layers: int, experts: int) -> dict:
    """openai/gpt-oss-{20b,120b}'s config.json, less its quantization_config: the published experts are MXFP4
    (refused by name), so this is the config of the checkpoint dequantised to bf16."""
    return {
        "architectures": ["GptOssForCausalLM"],
        "attention_bias": True,
        "attention_dropout": 0.0,
        "eos_token_id": 200002,
        "experts_per_token": 4,
        "head_dim": 64,
        "hidden_act": "silu",
        "hidden_size": 2880,
        "initial_context_length": 4096,
        "initializer_range": 0.02,
        "intermediate_size": 2880,
        "layer_types": ["sliding_attention", "full_attention"] * (layers // 2),
        "max_position_embeddings": 131072,
        "model_type": "gpt_oss",
        "num_attention_heads": 64,
        "num_experts_per_tok": 4,
        "num_hidden_layers": layers,
        "num_key_value_heads": 8,
        "num_local_experts": experts,
        "output_router_logits": False,
        "pad_token_id": 199999,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "rope_type": "yarn",
            "truncate": False,
        },
        "rope_theta": 150000,
        "router_aux_loss_coef": 0.9,
        "sliding_window": 128,
        "swiglu_limit": 7.0,
        "tie_word_embeddings": False,
        "use_cache": True,
        "vocab_size": 201088,
    }


PUBLISHED = {
    "gpt-oss-20b": ("GptOssConfig", published(24, 32)),
    "gpt-oss-120b": ("GptOssConfig", published(36, 128)),
}
