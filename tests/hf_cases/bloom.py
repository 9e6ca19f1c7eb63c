"""BLOOM: ALiBi at head counts that are not powers of two (slopes of 4 + 2 and 8 + 4 heads), a LayerNorm on
the embeddings, the per-head fused query_key_value, tied and untied heads."""

from __future__ import annotations

CONFIGS = {"bloom": "BloomConfig"}

CASES = {
    "bloom-6-heads-tied": {
        "family": "bloom",
        "hf_class": "BloomForCausalLM",
        "config": dict(vocab_size=96, hidden_size=48, n_layer=2, n_head=6),
    },
    "bloom-12-heads-untied": {
        "family": "bloom",
        "hf_class": "BloomForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=60,  # 12 heads of 5
            n_layer=3,
            n_head=12,
            layer_norm_epsilon=1e-6,
            tie_word_embeddings=False,
        ),
    },
}

BLOOM_TINY = {
    "name": "bloom-tiny",
    "architecture": "decoder",
    "vocab_size": 96,
    "d_model": 40,
    "num_layers": 2,
    "max_len": 64,
    "embed_norm": True,
    "attention": {"type": "mha", "num_heads": 5},
    "positional": {"type": "alibi"},
    "norm": {"type": "layernorm"},
    "ffn": {"type": "mlp", "hidden": 160, "activation": "gelu_tanh"},
    "head": {"type": "lm"},
}
ZOO_MODELS = {
    "bloom-tiny": (BLOOM_TINY, {}),
    "bloom-tiny-untied": (BLOOM_TINY, {"head.tie_embeddings": False, "attention.num_heads": 8}),
}

PUBLISHED = {
    "bloom-560m": (
        "BloomConfig",
        {
            "apply_residual_connection_post_layernorm": False,
            "architectures": ["BloomForCausalLM"],
            "attention_dropout": 0.0,
            "attention_softmax_in_fp32": True,
            "bias_dropout_fusion": True,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "hidden_dropout": 0.0,
            "hidden_size": 1024,
            "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05,
            "masked_softmax_fusion": True,
            "model_type": "bloom",
            "n_head": 16,
            "n_inner": None,
            "n_layer": 24,
            "offset_alibi": 100,
            "pad_token_id": 3,
            "pretraining_tp": 1,
            "skip_bias_add": True,
            "skip_bias_add_qkv": False,
            "slow_but_exact": False,
            "transformers_version": "4.20.0",
            "unk_token_id": 0,
            "use_cache": True,
            "vocab_size": 250880,
        },
    ),
}
