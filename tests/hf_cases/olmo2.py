"""OLMo 2: RMSNorm on each sub-layer's output (no input norm), QK RMSNorm over each whole projection, GQA, a
head_dim apart from hidden_size / heads, one attention_bias, tied and untied heads."""

from __future__ import annotations

CONFIGS = {"olmo2": "Olmo2Config"}

CASES = {
    "olmo2-gqa-untied": {
        "family": "olmo2",
        "hf_class": "Olmo2ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            eos_token_id=None,
        ),
    },
    "olmo2-gqa-head-dim-biased-tied": {
        "family": "olmo2",
        "hf_class": "Olmo2ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=3,
            head_dim=16,  # 6 heads of 16 over a width of 48: q_norm over 96 features, k_norm over 48
            attention_bias=True,
            tie_word_embeddings=True,
            rms_norm_eps=1e-6,
            rope_theta=500000.0,
            max_position_embeddings=64,
            pad_token_id=0,
            eos_token_id=None,
        ),
    },
}

OLMO2_TINY = {
    "name": "olmo2-tiny",
    "architecture": "decoder",
    "vocab_size": 96,
    "d_model": 32,
    "num_layers": 2,
    "max_len": 64,
    "norm_position": "output",
    "attention": {
        "type": "gqa",
        "num_heads": 4,
        "num_kv_heads": 2,
        "bias": False,
        "qk_norm": {"type": "rmsnorm", "eps": 1e-5},
        "qk_norm_scope": "projection",
    },
    "positional": {"type": "rope", "theta": 10000.0},
    "norm": {"type": "rmsnorm", "eps": 1e-5},
    "ffn": {"type": "swiglu", "hidden": 64},
    "head": {"type": "lm", "tie_embeddings": True},
}
OLMO2_MQA = {
    **OLMO2_TINY,
    "attention": {**OLMO2_TINY["attention"], "type": "mqa", "bias": True},
    "head": {"type": "lm", "tie_embeddings": False},
}
del OLMO2_MQA["attention"]["num_kv_heads"]
ZOO_MODELS = {
    "olmo2-tiny": (OLMO2_TINY, {}),
    "olmo2-tiny-mqa-biased-untied": (OLMO2_MQA, {}),
}

PUBLISHED = {
    "olmo-2-1b": (
        "Olmo2Config",
        {
            "architectures": ["Olmo2ForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "eos_token_id": 100257,
            "hidden_act": "silu",
            "hidden_size": 2048,
            "initializer_range": 0.02,
            "intermediate_size": 8192,
            "max_position_embeddings": 4096,
            "model_type": "olmo2",
            "num_attention_heads": 16,
            "num_hidden_layers": 16,
            "num_key_value_heads": 16,
            "pad_token_id": 100277,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 500000,
            "tie_word_embeddings": False,
            "torch_dtype": "float32",
            "transformers_version": "4.52.0.dev0",
            "use_cache": True,
            "vocab_size": 100352,
        },
    ),
}
