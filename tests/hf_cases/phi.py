"""Phi: a parallel block from one shared norm, partial rotary, biased attention and MLP, a biased untied head; with
head_dim != hidden_size / heads, and with grouped-query attention and per-head query/key LayerNorms."""

from __future__ import annotations

CONFIGS = {"phi": "PhiConfig"}

CASES = {
    "phi-2-style-head-dim": {
        "family": "phi",
        "hf_class": "PhiForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            head_dim=20,  # not hidden_size / heads
            partial_rotary_factor=0.4,  # 8 of 20 dims
            max_position_embeddings=128,
        ),
    },
    "phi-gqa-qk-layernorm": {
        "family": "phi",
        "hf_class": "PhiForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=2,
            qk_layernorm=True,
            hidden_act="gelu",
            layer_norm_eps=1e-6,
            rope_theta=1000.0,
            max_position_embeddings=64,
        ),
    },
}

ZOO_MODELS = {
    "phi-tiny-qk-norm": (
        {
            "name": "phi-tiny",
            "architecture": "decoder",
            "vocab_size": 256,
            "d_model": 64,
            "num_layers": 2,
            "max_len": 128,
            "block": {"parallel": True, "shared_norm": True},
            "attention": {"type": "mha", "num_heads": 4, "bias": True, "qk_norm": {"type": "layernorm"}},
            "positional": {"type": "rope", "rotary_fraction": 0.5},
            "norm": {"type": "layernorm"},
            "ffn": {"type": "mlp", "hidden": 96, "activation": "gelu_tanh"},
            "head": {"type": "lm", "tie_embeddings": False, "bias": True},
        },
        {},
    ),
}

PUBLISHED = {
    "phi-2": (
        "PhiConfig",
        {
            "_name_or_path": "microsoft/phi-2",
            "architectures": ["PhiForCausalLM"],
            "attention_dropout": 0.0,
            "bos_token_id": 50256,
            "embd_pdrop": 0.0,
            "eos_token_id": 50256,
            "hidden_act": "gelu_new",
            "hidden_size": 2560,
            "initializer_range": 0.02,
            "intermediate_size": 10240,
            "layer_norm_eps": 1e-05,
            "max_position_embeddings": 2048,
            "model_type": "phi",
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 32,
            "partial_rotary_factor": 0.4,
            "qk_layernorm": False,
            "resid_pdrop": 0.1,
            "rope_scaling": None,
            "rope_theta": 10000.0,
            "tie_word_embeddings": False,
            "torch_dtype": "float16",
            "transformers_version": "4.37.0",
            "use_cache": True,
            "vocab_size": 51200,
        },
    ),
}
