"""OPT: learned positions two rows on, pre-norm (125m) and post-norm (350m) blocks, projections in and out of a
narrower token table (word_embed_proj_dim), enable_bias and non-affine LayerNorms."""

from __future__ import annotations

CONFIGS = {"opt": "OPTConfig"}

CASES = {
    "opt-125m-style-pre-tied": {
        "family": "opt",
        "hf_class": "OPTForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            ffn_dim=64,
            max_position_embeddings=64,
        ),
    },
    "opt-350m-style-post-projected": {
        "family": "opt",
        "hf_class": "OPTForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=48,
            word_embed_proj_dim=24,  # project_in 24 -> 48, project_out 48 -> 24, a tied 80 x 24 table
            do_layer_norm_before=False,  # post-norm, no final LayerNorm
            num_hidden_layers=3,
            num_attention_heads=6,
            ffn_dim=80,
            max_position_embeddings=48,
        ),
    },
    "opt-pre-projected-untied-unbiased": {
        "family": "opt",
        "hf_class": "OPTForCausalLM",
        "config": dict(
            vocab_size=64,
            hidden_size=32,
            word_embed_proj_dim=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            ffn_dim=48,
            max_position_embeddings=32,
            enable_bias=False,
            layer_norm_elementwise_affine=False,
            activation_function="gelu",
            _remove_final_layer_norm=True,
            tie_word_embeddings=False,
            pad_token_id=0,
        ),
    },
}

OPT_TINY = {
    "name": "opt-tiny",
    "architecture": "decoder",
    "vocab_size": 96,
    "pad_token_id": 1,
    "d_model": 32,
    "num_layers": 2,
    "max_len": 64,
    "embedding": {"type": "token", "padding_idx": 1},
    "attention": {"type": "mha", "num_heads": 4},
    "positional": {"type": "learned", "offset": 2},
    "norm": {"type": "layernorm"},
    "ffn": {"type": "mlp", "hidden": 64, "activation": "relu"},
    "head": {"type": "lm"},
}
ZOO_MODELS = {
    "opt-tiny": (OPT_TINY, {}),
    "opt-tiny-post-projected-untied": (
        OPT_TINY,
        {
            "norm_position": "post",
            "embed_norm": False,
            "embedding.proj_dim": 16,
            "head": {"type": "lm", "tie_embeddings": False, "proj_dim": 16},
        },
    ),
}

PUBLISHED = {
    "opt-125m": (
        "OPTConfig",
        {
            "_name_or_path": "facebook/opt-125m",
            "_remove_final_layer_norm": False,
            "activation_dropout": 0.0,
            "activation_function": "relu",
            "architectures": ["OPTForCausalLM"],
            "attention_dropout": 0.0,
            "bos_token_id": 2,
            "do_layer_norm_before": True,
            "dropout": 0.1,
            "eos_token_id": 2,
            "ffn_dim": 3072,
            "hidden_size": 768,
            "init_std": 0.02,
            "layerdrop": 0.0,
            "max_position_embeddings": 2048,
            "model_type": "opt",
            "num_attention_heads": 12,
            "num_hidden_layers": 12,
            "pad_token_id": 1,
            "prefix": "</s>",
            "torch_dtype": "float16",
            "transformers_version": "4.21.0.dev0",
            "use_cache": True,
            "vocab_size": 50272,
            "word_embed_proj_dim": 768,
        },
    ),
}
