"""Gemma 3 (text): QK-norm, local layers (a window shorter than the 12-token test sequence) with their own rope
base, global layers with theirs, a capped final logit; heads wider than d / H."""

from __future__ import annotations

CONFIGS = {"gemma3": "Gemma3TextConfig"}

CASES = {
    "gemma3-window-3-pattern-3-capped": {
        "family": "gemma3",
        "hf_class": "Gemma3ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=4,
            sliding_window_pattern=3,  # local, local, global, local
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,  # not hidden_size / heads
            query_pre_attn_scalar=16,
            sliding_window=3,
            rope_theta=10000.0,  # global layers
            rope_local_base_freq=100.0,  # local layers: a base far from the global one
            final_logit_softcapping=3.0,
            initializer_range=0.3,  # wide reference weights: the cap bites
            max_position_embeddings=64,
        ),
    },
    "gemma3-mqa-untied-linear-global-rope": {
        "family": "gemma3",
        "hf_class": "Gemma3ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            num_attention_heads=6,
            num_key_value_heads=1,
            head_dim=8,
            query_pre_attn_scalar=24,  # scores scaled by 24 ** -0.5, not head_dim ** -0.5
            sliding_window=5,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "linear", "rope_theta": 1000000.0, "factor": 8.0},
            },
            hidden_activation="gelu",  # exact GELU
            attention_bias=True,
            tie_word_embeddings=False,
            rms_norm_eps=1e-5,
            max_position_embeddings=48,
        ),
    },
}


def gemma3_tiny(num_layers: int = 3, **attention) -> dict:
    """A zoo recipe of Gemma 3's shape: global layers 2, 5, ... with base 1e6, local layers (window 4, base 1e4)."""
    spec = {
        "type": "gqa",
        "num_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 24,
        "bias": False,
        "qk_norm": {"type": "rmsnorm", "eps": 1e-6, "offset": 1.0},
        **attention,
    }
    return {
        "extends": "llama-tiny",
        "name": "gemma3-tiny",
        "num_layers": num_layers,
        "block": {"norm_position": "sandwich"},
        "embedding": {"type": "token", "scale": True, "round_scale": True},
        "positional": {"type": "rope", "theta": 10000.0},
        "attention": {**spec, "window": 4},
        "layers": [{"select": "2::3", "attention": {**spec, "rotary": {"type": "rope", "theta": 1000000.0}}}],
        "norm": {"type": "rmsnorm", "eps": 1e-6, "offset": 1.0},
        "ffn": {"type": "geglu", "hidden": 128, "approximate": "tanh"},
        "head": {"type": "lm", "tie_embeddings": True},
    }


ZOO_MODELS = {
    "gemma3-tiny": (gemma3_tiny(), {}),
    "gemma3-tiny-scaled-capped-untied": (
        gemma3_tiny(4, scale=0.125),
        {"head.tie_embeddings": False, "head.softcap": 10.0},
    ),
    "gemma3-tiny-local-layers-only": (gemma3_tiny(), {"layers": []}),
}

PUBLISHED = {
    "gemma-3-1b": (
        "Gemma3TextConfig",
        {
            "architectures": ["Gemma3ForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "attn_logit_softcapping": None,
            "bos_token_id": 2,
            "cache_implementation": "hybrid",
            "eos_token_id": 1,
            "final_logit_softcapping": None,
            "head_dim": 256,
            "hidden_activation": "gelu_pytorch_tanh",
            "hidden_size": 1152,
            "initializer_range": 0.02,
            "intermediate_size": 6912,
            "max_position_embeddings": 32768,
            "model_type": "gemma3_text",
            "num_attention_heads": 4,
            "num_hidden_layers": 26,
            "num_key_value_heads": 1,
            "pad_token_id": 0,
            "query_pre_attn_scalar": 256,
            "rms_norm_eps": 1e-06,
            "rope_local_base_freq": 10000,
            "rope_scaling": None,
            "rope_theta": 1000000,
            "sliding_window": 512,
            "sliding_window_pattern": 6,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.50.0.dev0",
            "use_cache": True,
            "vocab_size": 262144,
        },
    ),
}
