"""GPT-NeoX / Pythia: parallel residual with two norms, partial rotary, biased MHA, untied head; and the sequential
block, no biases, a tied head, and a rotary fraction transformers truncates where zoo would round."""

from __future__ import annotations

CONFIGS = {"gpt_neox": "GPTNeoXConfig"}

CASES = {
    "gpt-neox-parallel": {
        "family": "gpt_neox",
        "hf_class": "GPTNeoXForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,  # head_dim 16, rotary_pct 0.25: 4 dims rotated
            intermediate_size=96,
            max_position_embeddings=128,
        ),
    },
    "gpt-neox-sequential-unbiased-tied-truncated": {
        "family": "gpt_neox",
        "hf_class": "GPTNeoXForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=96,
            num_hidden_layers=3,
            num_attention_heads=3,  # head_dim 32
            intermediate_size=80,
            max_position_embeddings=64,
            rotary_pct=0.9,  # 28.8 dims: transformers rotates 28 (int), zoo's round would give 29
            rotary_emb_base=500.0,
            use_parallel_residual=False,
            attention_bias=False,
            tie_word_embeddings=True,
            hidden_act="gelu_new",
            layer_norm_eps=1e-6,
        ),
    },
}

ZOO_MODELS = {
    "gpt-neox-tiny": (
        {
            "name": "gpt-neox-tiny",
            "architecture": "decoder",
            "vocab_size": 256,
            "d_model": 64,
            "num_layers": 2,
            "max_len": 128,
            "block": {"parallel": True},
            "attention": {"type": "mha", "num_heads": 4, "bias": True},
            "positional": {"type": "rope", "rotary_fraction": 0.25},
            "norm": {"type": "layernorm"},
            "ffn": {"type": "mlp", "hidden": 96, "activation": "gelu"},
            "head": {"type": "lm", "tie_embeddings": False},
        },
        {},
    ),
}

PUBLISHED = {
    "pythia-160m": (
        "GPTNeoXConfig",
        {
            "architectures": ["GPTNeoXForCausalLM"],
            "bos_token_id": 0,
            "eos_token_id": 0,
            "hidden_act": "gelu",
            "hidden_size": 768,
            "initializer_range": 0.02,
            "intermediate_size": 3072,
            "layer_norm_eps": 1e-05,
            "max_position_embeddings": 2048,
            "model_type": "gpt_neox",
            "num_attention_heads": 12,
            "num_hidden_layers": 12,
            "rotary_emb_base": 10000,
            "rotary_pct": 0.25,
            "tie_word_embeddings": False,
            "torch_dtype": "float16",
            "transformers_version": "4.24.0",
            "use_cache": True,
            "use_parallel_residual": True,
            "vocab_size": 50304,
        },
    ),
}
