"""Phi-3: fused qkv (grouped-query, so q, k and v of unequal widths) and gate_up projections, a sliding window
shorter than the test sequence; and Phi-4-mini's partial rotary with a tied head and head_dim != hidden / heads."""

from __future__ import annotations

CONFIGS = {"phi3": "Phi3Config"}

CASES = {
    "phi3-gqa-window-4": {
        "family": "phi3",
        "hf_class": "Phi3ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            original_max_position_embeddings=128,
            sliding_window=4,
            pad_token_id=0,
        ),
    },
    "phi4-mini-style-partial-rotary-tied": {
        "family": "phi3",
        "hf_class": "Phi3ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=24,  # not hidden_size / heads
            partial_rotary_factor=0.75,  # 18 of 24 dims
            tie_word_embeddings=True,
            rope_theta=250.0,
            rms_norm_eps=1e-6,
            max_position_embeddings=64,
            original_max_position_embeddings=64,
            pad_token_id=None,
        ),
    },
}

ZOO_MODELS = {
    "phi3-tiny-window-5": (
        {
            "name": "phi3-tiny",
            "architecture": "decoder",
            "vocab_size": 256,
            "d_model": 64,
            "num_layers": 2,
            "max_len": 128,
            "attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": False, "window": 5},
            "positional": {"type": "rope", "rotary_fraction": 0.5},
            "norm": {"type": "rmsnorm", "eps": 1e-5},
            "ffn": {"type": "swiglu", "hidden": 96},
            "head": {"type": "lm", "tie_embeddings": False},
        },
        {},
    ),
}

PUBLISHED = {
    "phi-3-mini-4k": (
        "Phi3Config",
        {
            "_name_or_path": "Phi-3-mini-4k-instruct",
            "architectures": ["Phi3ForCausalLM"],
            "attention_dropout": 0.0,
            "bos_token_id": 1,
            "embd_pdrop": 0.0,
            "eos_token_id": 32000,
            "hidden_act": "silu",
            "hidden_size": 3072,
            "initializer_range": 0.02,
            "intermediate_size": 8192,
            "max_position_embeddings": 4096,
            "model_type": "phi3",
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 32,
            "original_max_position_embeddings": 4096,
            "pad_token_id": 32000,
            "resid_pdrop": 0.0,
            "rms_norm_eps": 1e-05,
            "rope_scaling": None,
            "rope_theta": 10000.0,
            "sliding_window": 2047,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.40.2",
            "use_cache": True,
            "vocab_size": 32064,
        },
    ),
}
