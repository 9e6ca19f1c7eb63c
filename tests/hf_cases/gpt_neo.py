"""GPT-Neo: global and local layers alternating, with a window shorter than the test prompts; and every layer local
after a global one (a pattern of three), an untied head, its own FFN width and activation."""

from __future__ import annotations

CONFIGS = {"gpt_neo": "GPTNeoConfig"}

CASES = {
    "gpt-neo-global-local": {
        "family": "gpt_neo",
        "hf_class": "GPTNeoForCausalLM",
        "config": dict(
            vocab_size=96,
            max_position_embeddings=64,
            hidden_size=32,
            num_layers=2,
            num_heads=4,
            attention_types=[[["global", "local"], 1]],
            window_size=4,
        ),
    },
    "gpt-neo-local-heavy-untied": {
        "family": "gpt_neo",
        "hf_class": "GPTNeoForCausalLM",
        "config": dict(
            vocab_size=80,
            max_position_embeddings=48,
            hidden_size=48,
            num_layers=6,
            num_heads=6,
            attention_types=[[["global", "local", "local"], 2]],
            window_size=5,
            intermediate_size=80,
            activation_function="gelu",
            layer_norm_epsilon=1e-6,
            tie_word_embeddings=False,
        ),
    },
}

LOCAL = {"type": "mha", "num_heads": 4, "scale": 1.0, "bias": False, "o_bias": True, "window": 4}
ZOO_MODELS = {
    # zoo's GPT-2 with unscaled scores and every other layer local: GPT-Neo's network
    "gpt-tiny-neo": (
        "gpt-tiny",
        {"attention": {**LOCAL, "window": None}, "layers": [{"select": "1::2", "attention": LOCAL}]},
    ),
}


def gpt_neo(hidden_size: int, num_layers: int, num_heads: int) -> dict:
    """A GPT-Neo config.json (EleutherAI's), global and local layers alternating."""
    return {
        "activation_function": "gelu_new",
        "architectures": ["GPTNeoForCausalLM"],
        "attention_dropout": 0,
        "attention_layers": ["global", "local"] * (num_layers // 2),
        "attention_types": [[["global", "local"], num_layers // 2]],
        "bos_token_id": 50256,
        "embed_dropout": 0,
        "eos_token_id": 50256,
        "gradient_checkpointing": False,
        "hidden_size": hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": None,
        "layer_norm_epsilon": 1e-05,
        "max_position_embeddings": 2048,
        "model_type": "gpt_neo",
        "num_heads": num_heads,
        "num_layers": num_layers,
        "resid_dropout": 0,
        "summary_activation": None,
        "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True,
        "summary_type": "cls_index",
        "summary_use_proj": True,
        "tokenizer_class": "GPT2Tokenizer",
        "transformers_version": "4.9.0.dev0",
        "use_cache": True,
        "vocab_size": 50257,
        "window_size": 256,
    }


PUBLISHED = {
    "gpt-neo-1.3b": ("GPTNeoConfig", gpt_neo(2048, 24, 16)),
    "gpt-neo-125m": ("GPTNeoConfig", gpt_neo(768, 12, 12)),
}
