"""Mistral: Llama with sliding-window attention (a window shorter than the 12-token test sequence), or none."""

from __future__ import annotations

CONFIGS = {"mistral": "MistralConfig"}

CASES = {
    "mistral-window-4": {
        "family": "mistral",
        "hf_class": "MistralForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,  # not hidden_size / heads
            max_position_embeddings=128,
            sliding_window=4,
            rope_theta=1000.0,
        ),
    },
    "mistral-no-window-mqa-tied": {
        "family": "mistral",
        "hf_class": "MistralForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            intermediate_size=80,
            num_hidden_layers=2,
            num_attention_heads=6,
            num_key_value_heads=1,
            max_position_embeddings=64,
            sliding_window=None,
            tie_word_embeddings=True,
            rms_norm_eps=1e-5,
        ),
    },
}

ZOO_MODELS = {
    "llama-tiny-window-5": ("llama-tiny", {"attention.window": 5}),
}

PUBLISHED = {
    "mistral-7b-v0.1": (
        "MistralConfig",
        {
            "architectures": ["MistralForCausalLM"],
            "bos_token_id": 1,
            "eos_token_id": 2,
            "hidden_act": "silu",
            "hidden_size": 4096,
            "initializer_range": 0.02,
            "intermediate_size": 14336,
            "max_position_embeddings": 32768,
            "model_type": "mistral",
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 8,
            "rms_norm_eps": 1e-05,
            "rope_theta": 10000.0,
            "sliding_window": 4096,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.34.0.dev0",
            "use_cache": True,
            "vocab_size": 32000,
        },
    ),
}
