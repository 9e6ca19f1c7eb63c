"""Gemma: Llama's layout with (1 + w) RMSNorms, sqrt(d) embeddings and GeGLU (tanh); heads wider than d / H."""

from __future__ import annotations

CONFIGS = {"gemma": "GemmaConfig"}

CASES = {
    "gemma-mqa-tied": {
        "family": "gemma",
        "hf_class": "GemmaForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=16,  # not hidden_size / heads, as in Gemma 7B (3072 / 16 = 192, heads of 256)
            max_position_embeddings=64,
        ),
    },
    "gemma-gqa-biased-untied-legacy-gelu": {
        "family": "gemma",
        "hf_class": "GemmaForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=2,
            head_dim=8,
            hidden_act="gelu",  # the first releases' value: transformers (and zoo) read the tanh GELU
            attention_bias=True,
            tie_word_embeddings=False,
            rms_norm_eps=1e-5,
            rope_theta=500000.0,
            max_position_embeddings=48,
        ),
    },
    "gemma-linear-rope-silu": {
        "family": "gemma",
        "hf_class": "GemmaForCausalLM",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=16,
            hidden_act="silu",
            max_position_embeddings=128,
            rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
        ),
    },
}

GEMMA_TINY = {
    "extends": "llama-tiny",
    "name": "gemma-tiny",
    "embedding": {"type": "token", "scale": True, "round_scale": True},
    "norm": {"type": "rmsnorm", "eps": 1e-6, "offset": 1.0},
    "ffn": {"type": "geglu", "hidden": 128, "approximate": "tanh"},
}
ZOO_MODELS = {
    "gemma-tiny": (GEMMA_TINY, {}),
    "gemma-tiny-mqa-wide-heads-untied": (
        GEMMA_TINY,
        {"attention.num_kv_heads": 1, "attention.head_dim": 24, "head.tie_embeddings": False},
    ),
}

PUBLISHED = {
    "gemma-2b": (
        "GemmaConfig",
        {
            "architectures": ["GemmaForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 2,
            "eos_token_id": 1,
            "head_dim": 256,
            "hidden_act": "gelu",
            "hidden_size": 2048,
            "initializer_range": 0.02,
            "intermediate_size": 16384,
            "max_position_embeddings": 8192,
            "model_type": "gemma",
            "num_attention_heads": 8,
            "num_hidden_layers": 18,
            "num_key_value_heads": 1,
            "pad_token_id": 0,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 10000.0,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.38.0.dev0",
            "use_cache": True,
            "vocab_size": 256000,
        },
    ),
}
