"""StableLM: Llama's decoder with LayerNorm, partial rotary and biases on q/k/v only (StableLM 2), grouped-query
attention; and the parallel block from one shared norm with a tied head and a tanh-GELU gated FFN."""

from __future__ import annotations

CONFIGS = {"stablelm": "StableLmConfig"}

CASES = {
    "stablelm-2-style-qkv-bias-gqa": {
        "family": "stablelm",
        "hf_class": "StableLmForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,  # head_dim 16: 4 dims rotated
            num_key_value_heads=2,
            use_qkv_bias=True,
            max_position_embeddings=128,
        ),
    },
    "stablelm-parallel-tied-geglu": {
        "family": "stablelm",
        "hf_class": "StableLmForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=3,  # head_dim 16
            num_key_value_heads=3,
            partial_rotary_factor=0.5,
            use_parallel_residual=True,
            tie_word_embeddings=True,
            hidden_act="gelu_pytorch_tanh",
            layer_norm_eps=1e-6,
            rope_theta=1000.0,
            max_position_embeddings=64,
        ),
    },
}

ZOO_MODELS = {
    "stablelm-tiny": (
        {
            "name": "stablelm-tiny",
            "architecture": "decoder",
            "vocab_size": 256,
            "d_model": 64,
            "num_layers": 2,
            "max_len": 128,
            "attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "bias": True, "o_bias": False},
            "positional": {"type": "rope", "rotary_fraction": 0.25},
            "norm": {"type": "layernorm"},
            "ffn": {"type": "swiglu", "hidden": 96},
            "head": {"type": "lm", "tie_embeddings": False},
        },
        {},
    ),
}

PUBLISHED = {
    "stablelm-2-1.6b": (
        "StableLmConfig",
        {
            "architectures": ["StableLmForCausalLM"],
            "bos_token_id": 100257,
            "eos_token_id": 100257,
            "hidden_act": "silu",
            "hidden_dropout": 0.0,
            "hidden_size": 2048,
            "initializer_range": 0.02,
            "intermediate_size": 5632,
            "layer_norm_eps": 1e-05,
            "max_position_embeddings": 4096,
            "model_type": "stablelm",
            "num_attention_heads": 32,
            "num_hidden_layers": 24,
            "num_key_value_heads": 32,
            "partial_rotary_factor": 0.25,
            "rope_theta": 10000,
            "tie_word_embeddings": False,
            "torch_dtype": "float16",
            "transformers_version": "4.38.0",
            "use_cache": True,
            "use_qkv_bias": True,
            "vocab_size": 100352,
        },
    ),
}
