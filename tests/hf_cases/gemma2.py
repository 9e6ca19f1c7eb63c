"""Gemma 2: sandwich norms, soft-capped scores and logits, local (window shorter than the 12-token test sequence)
and global layers, the score scale of query_pre_attn_scalar; heads wider than d / H."""

from __future__ import annotations

CONFIGS = {"gemma2": "Gemma2Config"}

CASES = {
    "gemma2-window-4-capped": {
        "family": "gemma2",
        "hf_class": "Gemma2ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,  # local, global, local
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,  # not hidden_size / heads
            query_pre_attn_scalar=16,  # = head_dim: zoo's default scale
            sliding_window=4,
            attn_logit_softcapping=2.0,  # caps that bite: the reference weights are drawn wide
            final_logit_softcapping=3.0,
            initializer_range=0.3,
            max_position_embeddings=64,
        ),
    },
    "gemma2-mqa-untied-own-layer-types": {
        "family": "gemma2",
        "hf_class": "Gemma2ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=4,
            num_attention_heads=6,
            num_key_value_heads=1,
            head_dim=12,
            query_pre_attn_scalar=24,  # scores scaled by 24 ** -0.5, not head_dim ** -0.5
            sliding_window=6,
            layer_types=["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
            attn_logit_softcapping=None,
            final_logit_softcapping=None,
            hidden_activation="gelu",  # exact GELU (Gemma 2 does not rename it)
            attention_bias=True,
            tie_word_embeddings=False,
            rope_theta=1000.0,
            rms_norm_eps=1e-5,
            max_position_embeddings=48,
        ),
    },
}


def gemma2_tiny(num_layers: int = 2, **attention) -> dict:
    """A zoo recipe of Gemma 2's shape: local layers 0, 2, ... (window 5), the rest global."""
    spec = {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 24, "bias": False, **attention}
    return {
        "extends": "llama-tiny",
        "name": "gemma2-tiny",
        "num_layers": num_layers,
        "block": {"norm_position": "sandwich"},
        "embedding": {"type": "token", "scale": True, "round_scale": True},
        "attention": spec,
        "layers": [{"select": "0::2", "attention": {**spec, "window": 5}}],
        "norm": {"type": "rmsnorm", "eps": 1e-6, "offset": 1.0},
        "ffn": {"type": "geglu", "hidden": 128, "approximate": "tanh"},
        "head": {"type": "lm", "tie_embeddings": True, "softcap": 30.0},
    }


ZOO_MODELS = {
    "gemma2-tiny": (gemma2_tiny(softcap=50.0), {}),
    "gemma2-tiny-scaled-untied-3-layers": (
        gemma2_tiny(3, scale=0.125),
        {"head.tie_embeddings": False, "head.softcap": None},
    ),
    "gemma2-tiny-global-layers-only": (gemma2_tiny(), {"layers": []}),
}

PUBLISHED = {
    "gemma-2-2b": (
        "Gemma2Config",
        {
            "architectures": ["Gemma2ForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "attn_logit_softcapping": 50.0,
            "bos_token_id": 2,
            "cache_implementation": "hybrid",
            "eos_token_id": 1,
            "final_logit_softcapping": 30.0,
            "head_dim": 256,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_activation": "gelu_pytorch_tanh",
            "hidden_size": 2304,
            "initializer_range": 0.02,
            "intermediate_size": 9216,
            "max_position_embeddings": 8192,
            "model_type": "gemma2",
            "num_attention_heads": 8,
            "num_hidden_layers": 26,
            "num_key_value_heads": 4,
            "pad_token_id": 0,
            "query_pre_attn_scalar": 256,
            "rms_norm_eps": 1e-06,
            "rope_theta": 10000.0,
            "sliding_window": 4096,
            "torch_dtype": "float32",
            "transformers_version": "4.42.4",
            "use_cache": True,
            "vocab_size": 256000,
        },
    ),
}
