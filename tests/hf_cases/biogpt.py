"""BioGPT: scaled embeddings, learned positions two rows on, a tied head; and unscaled embeddings, an untied head,
another pad id, ReLU and its own (unread) layer_norm_eps."""

from __future__ import annotations

CONFIGS = {"biogpt": "BioGptConfig"}

CASES = {
    "biogpt-tied": {
        "family": "biogpt",
        "hf_class": "BioGptForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
        ),
    },
    "biogpt-unscaled-untied-relu": {
        "family": "biogpt",
        "hf_class": "BioGptForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            num_hidden_layers=3,
            num_attention_heads=6,
            intermediate_size=80,
            max_position_embeddings=48,
            scale_embedding=False,
            pad_token_id=5,
            hidden_act="relu",
            layer_norm_eps=1e-7,
            tie_word_embeddings=False,
        ),
    },
}

PUBLISHED = {
    "biogpt": (
        "BioGptConfig",
        {
            "activation_dropout": 0.0,
            "architectures": ["BioGptForCausalLM"],
            "attention_probs_dropout_prob": 0.1,
            "bos_token_id": 0,
            "eos_token_id": 2,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "hidden_size": 1024,
            "initializer_range": 0.02,
            "intermediate_size": 4096,
            "layer_norm_eps": 1e-12,
            "layerdrop": 0.0,
            "max_position_embeddings": 1024,
            "model_type": "biogpt",
            "num_attention_heads": 16,
            "num_hidden_layers": 24,
            "pad_token_id": 1,
            "scale_embedding": True,
            "torch_dtype": "float32",
            "transformers_version": "4.25.0.dev0",
            "use_cache": True,
            "vocab_size": 42384,
        },
    ),
}
