"""StarCoder2: biased GQA over a sliding window, LayerNorm with bias, a GELU-tanh MLP with biases, tied head."""

from __future__ import annotations

CONFIGS = {"starcoder2": "Starcoder2Config"}

CASES = {
    "starcoder2-window-4-tied": {
        "family": "starcoder2",
        "hf_class": "Starcoder2ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            sliding_window=4,  # shorter than the 12-token test sequence
            rope_theta=999999.4420358813,
            bos_token_id=0,
            eos_token_id=0,
        ),
    },
    "starcoder2-unbiased-untied-head-dim": {
        "family": "starcoder2",
        "hf_class": "Starcoder2ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=3,
            num_attention_heads=6,
            num_key_value_heads=1,
            head_dim=16,  # not hidden_size / heads
            max_position_embeddings=64,
            use_bias=False,
            tie_word_embeddings=False,
            hidden_act="gelu",
            norm_epsilon=1e-6,
            residual_dropout=0.1,
            embedding_dropout=0.1,
            attention_dropout=0.05,
            bos_token_id=0,
            eos_token_id=0,
        ),
    },
}

ZOO_MODELS = {
    "starcoder2-tiny": (
        "gpt-tiny",
        {
            "positional": {"type": "rope", "theta": 100000.0},
            "attention": {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "window": 6},
            "ffn.activation": "gelu_tanh",
        },
    ),
}

PUBLISHED = {
    "starcoder2-3b": (
        "Starcoder2Config",
        {
            "architectures": ["Starcoder2ForCausalLM"],
            "attention_dropout": 0.1,
            "residual_dropout": 0.1,
            "embedding_dropout": 0.1,
            "bos_token_id": 0,
            "eos_token_id": 0,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": 3072,
            "initializer_range": 0.018042,
            "intermediate_size": 12288,
            "layer_norm_epsilon": 1e-05,
            "max_position_embeddings": 16384,
            "mlp_type": "default",
            "model_type": "starcoder2",
            "norm_epsilon": 1e-05,
            "norm_type": "layer_norm",
            "num_attention_heads": 24,
            "num_hidden_layers": 30,
            "num_key_value_heads": 2,
            "rope_theta": 999999.4420358813,
            "sliding_window": 4096,
            "torch_dtype": "float32",
            "transformers_version": "4.37.0.dev0",
            "use_bias": True,
            "use_cache": True,
            "vocab_size": 49152,
        },
    ),
}
