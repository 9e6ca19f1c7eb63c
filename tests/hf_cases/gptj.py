"""GPT-J: a parallel block with one shared norm, interleaved RoPE over part of each head, unbiased attention, a
biased MLP and a biased untied head; a second shape rotates all of each head with ReLU."""

from __future__ import annotations

CONFIGS = {"gptj": "GPTJConfig"}

CASES = {
    "gptj-partial-rotary": {
        "family": "gptj",
        "hf_class": "GPTJForCausalLM",
        "config": dict(
            vocab_size=96,
            n_positions=64,
            n_embd=64,
            n_layer=2,
            n_head=4,  # head_dim 16
            rotary_dim=6,
        ),
    },
    "gptj-full-rotary-relu": {
        "family": "gptj",
        "hf_class": "GPTJForCausalLM",
        "config": dict(
            vocab_size=80,
            n_positions=48,
            n_embd=48,
            n_layer=3,
            n_head=3,
            rotary_dim=16,  # the whole head
            n_inner=72,
            activation_function="relu",
            layer_norm_epsilon=1e-6,
        ),
    },
}

ZOO_MODELS = {
    "gptj-tiny": (
        {
            "name": "gptj-tiny",
            "architecture": "decoder",
            "vocab_size": 256,
            "d_model": 64,
            "num_layers": 2,
            "max_len": 128,
            "block": {"parallel": True, "shared_norm": True},
            "attention": {"type": "mha", "num_heads": 4, "bias": False},
            "positional": {"type": "rope", "interleaved": True, "rotary_fraction": 0.5},
            "norm": {"type": "layernorm"},
            "ffn": {"type": "mlp", "hidden": 96, "activation": "gelu_tanh"},
            "head": {"type": "lm", "tie_embeddings": False, "bias": True},
        },
        {},
    ),
}

PUBLISHED = {
    "gpt-j-6b": (
        "GPTJConfig",
        {
            "activation_function": "gelu_new",
            "architectures": ["GPTJForCausalLM"],
            "attn_pdrop": 0.0,
            "bos_token_id": 50256,
            "embd_pdrop": 0.0,
            "eos_token_id": 50256,
            "gradient_checkpointing": False,
            "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05,
            "model_type": "gptj",
            "n_embd": 4096,
            "n_head": 16,
            "n_inner": None,
            "n_layer": 28,
            "n_positions": 2048,
            "resid_pdrop": 0.0,
            "rotary": True,
            "rotary_dim": 64,
            "scale_attn_weights": True,
            "summary_activation": None,
            "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True,
            "summary_type": "cls_index",
            "summary_use_proj": True,
            "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50, "temperature": 1.0}},
            "tie_word_embeddings": False,
            "tokenizer_class": "GPT2Tokenizer",
            "transformers_version": "4.18.0.dev0",
            "use_cache": True,
            "vocab_size": 50400,
        },
    ),
}
