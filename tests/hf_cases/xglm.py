"""XGLM: scaled embeddings, fairseq sinusoids two rows on, a tied head; and unscaled embeddings, pad id 0, an untied
head and ReLU."""

from __future__ import annotations

CONFIGS = {"xglm": "XGLMConfig"}

CASES = {
    "xglm-tied": {
        "family": "xglm",
        "hf_class": "XGLMForCausalLM",
        "config": dict(
            vocab_size=96, max_position_embeddings=64, d_model=32, ffn_dim=64, num_layers=2, attention_heads=4
        ),
    },
    "xglm-unscaled-untied-relu": {
        "family": "xglm",
        "hf_class": "XGLMForCausalLM",
        "config": dict(
            vocab_size=80,
            max_position_embeddings=48,
            d_model=48,
            ffn_dim=80,
            num_layers=3,
            attention_heads=6,
            scale_embedding=False,
            pad_token_id=0,
            activation_function="relu",
            tie_word_embeddings=False,
        ),
    },
}

PUBLISHED = {
    "xglm-564m": (
        "XGLMConfig",
        {
            "activation_dropout": 0.0,
            "activation_function": "gelu",
            "architectures": ["XGLMForCausalLM"],
            "attention_dropout": 0.1,
            "attention_heads": 16,
            "bos_token_id": 0,
            "d_model": 1024,
            "decoder_start_token_id": 2,
            "dropout": 0.1,
            "eos_token_id": 2,
            "ffn_dim": 4096,
            "init_std": 0.02,
            "layerdrop": 0.0,
            "max_position_embeddings": 2048,
            "model_type": "xglm",
            "num_layers": 24,
            "pad_token_id": 1,
            "scale_embedding": True,
            "transformers_version": "4.16.0.dev0",
            "use_cache": True,
            "vocab_size": 256008,
        },
    ),
}
