"""Falcon: Falcon-7B's parallel block from one norm with multi-query attention and a tied head; Falcon-40B's new
decoder (grouped key/value heads, two norms) with biases, an untied head and a rope base; the sequential MHA block."""

from __future__ import annotations

CONFIGS = {"falcon": "FalconConfig"}

CASES = {
    "falcon-7b-style-mqa": {
        "family": "falcon",
        "hf_class": "FalconForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            ffn_hidden_size=96,
            max_position_embeddings=128,
        ),
    },
    "falcon-40b-style-gqa-two-norms-biased-untied": {
        "family": "falcon",
        "hf_class": "FalconForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_kv_heads=2,  # groups of 3 query heads
            new_decoder_architecture=True,
            bias=True,
            tie_word_embeddings=False,
            activation="gelu_new",
            rope_theta=500.0,
            layer_norm_epsilon=1e-6,
            max_position_embeddings=64,
        ),
    },
    "falcon-sequential-mha": {
        "family": "falcon",
        "hf_class": "FalconForCausalLM",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            multi_query=False,
            parallel_attn=False,
            ffn_hidden_size=48,
            max_position_embeddings=64,
        ),
    },
}

ZOO_MODELS = {
    "falcon-tiny-gqa-shared-norm": (
        {
            "name": "falcon-tiny",
            "architecture": "decoder",
            "vocab_size": 256,
            "d_model": 64,
            "num_layers": 2,
            "max_len": 128,
            "block": {"parallel": True, "shared_norm": True},
            "attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": False},
            "positional": {"type": "rope"},
            "norm": {"type": "layernorm"},
            "ffn": {"type": "mlp", "hidden": 96, "bias": False},
            "head": {"type": "lm", "tie_embeddings": True},
        },
        {},
    ),
}

PUBLISHED = {
    "falcon-7b": (
        "FalconConfig",
        {
            "alibi": False,
            "apply_residual_connection_post_layernorm": False,
            "architectures": ["FalconForCausalLM"],
            "attention_dropout": 0.0,
            "bias": False,
            "bos_token_id": 11,
            "eos_token_id": 11,
            "hidden_dropout": 0.0,
            "hidden_size": 4544,
            "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05,
            "model_type": "falcon",
            "multi_query": True,
            "new_decoder_architecture": False,
            "num_attention_heads": 71,
            "num_hidden_layers": 32,
            "parallel_attn": True,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.27.4",
            "use_cache": True,
            "vocab_size": 65024,
        },
    ),
}
