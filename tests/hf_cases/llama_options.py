"""Llama and Mixtral options that import since sliding windows and the tanh GELU are zoo's: Llama's
``hidden_act: gelu_pytorch_tanh`` (zoo's geglu with ``approximate: tanh``) and Mixtral's ``sliding_window``."""

from __future__ import annotations

CONFIGS = {"llama": "LlamaConfig", "mixtral": "MixtralConfig"}

CASES = {
    "llama-gelu-tanh": {
        "family": "llama",
        "hf_class": "LlamaForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            hidden_act="gelu_pytorch_tanh",
        ),
    },
    "mixtral-window-5": {
        "family": "mixtral",
        "hf_class": "MixtralForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
            max_position_embeddings=64,
            sliding_window=5,  # shorter than the 12-token test sequence
        ),
    },
}

ZOO_MODELS = {
    "llama-tiny-geglu-tanh": ("llama-tiny", {"ffn": {"type": "geglu", "hidden": 96, "approximate": "tanh"}}),
    "llama-tiny-geglu": ("llama-tiny", {"ffn": {"type": "geglu", "hidden": 96}}),
}
