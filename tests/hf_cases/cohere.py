"""Cohere and Cohere2: parallel blocks under one bias-free LayerNorm, interleaved RoPE, scaled logits; Cohere2's
sliding RoPE layers beside full NoPE ones."""

from __future__ import annotations

CONFIGS = {"cohere": "CohereConfig", "cohere2": "Cohere2Config"}

TINY = dict(
    vocab_size=96,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    logit_scale=0.25,
    rope_theta=1000.0,
)
OTHER = dict(
    vocab_size=80,
    hidden_size=48,
    intermediate_size=80,
    num_hidden_layers=2,
    num_attention_heads=6,
    max_position_embeddings=64,
    attention_bias=True,
    tie_word_embeddings=False,
    logit_scale=0.3,
    layer_norm_eps=1e-6,
)
CASES = {
    "cohere-gqa-tied": {"family": "cohere", "hf_class": "CohereForCausalLM", "config": TINY},
    "cohere-biased-untied": {"family": "cohere", "hf_class": "CohereForCausalLM", "config": OTHER},
    "cohere2-window-4-pattern-4": {
        "family": "cohere2",
        "hf_class": "Cohere2ForCausalLM",
        "config": {**TINY, "sliding_window": 4, "sliding_window_pattern": 4},
    },
    "cohere2-listed-types-biased": {
        "family": "cohere2",
        "hf_class": "Cohere2ForCausalLM",
        "config": {**OTHER, "sliding_window": 5, "layer_types": ["full_attention", "sliding_attention"]},
    },
}

PUBLISHED = {
    "command-r-v01": (
        "CohereConfig",
        {
            "architectures": ["CohereForCausalLM"],
            "attention_bias": False,
            "bos_token_id": 5,
            "eos_token_id": 255001,
            "hidden_act": "silu",
            "hidden_size": 8192,
            "intermediate_size": 22528,
            "layer_norm_eps": 1e-05,
            "logit_scale": 0.0625,
            "max_position_embeddings": 8192,
            "model_type": "cohere",
            "num_attention_heads": 64,
            "num_hidden_layers": 40,
            "num_key_value_heads": 64,
            "pad_token_id": 0,
            "rope_theta": 8000000.0,
            "tie_word_embeddings": True,
            "use_qk_norm": False,
            "vocab_size": 256000,
        },
    ),
    "command-r7b": (
        "Cohere2Config",
        {
            "architectures": ["Cohere2ForCausalLM"],
            "attention_bias": False,
            "bos_token_id": 5,
            "eos_token_id": 255001,
            "hidden_act": "silu",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "layer_norm_eps": 1e-05,
            "logit_scale": 0.25,
            "max_position_embeddings": 132096,
            "model_type": "cohere2",
            "num_attention_heads": 32,
            "num_hidden_layers": 32,
            "num_key_value_heads": 8,
            "pad_token_id": 0,
            "rope_theta": 50000.0,
            "sliding_window": 4096,
            "sliding_window_pattern": 4,
            "tie_word_embeddings": True,
            "vocab_size": 256000,
        },
    ),
}
