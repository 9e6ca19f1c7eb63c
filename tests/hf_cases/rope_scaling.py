"""RoPE scalings across families: YaRN (every parameter; the factor left to transformers' fallback; on Gemma 3's
global layers), dynamic NTK (5.x and 4.x keys) and LongRoPE on Phi-3 with partial rotation.

Lengths are chosen so that the scalings that depend on the sequence's length meet both of their regimes:

- LongRoPE switches to its long factors past ``original_max_position_embeddings`` = 8: the 12-token parity
  batch runs on the long factors, generation (6-token prompts) starts on the short ones and crosses over at its
  ninth token (where Phi-3's ``generate`` recomputes its cache, and zoo's cached keys turn with it).
- Dynamic NTK grows its base past ``max_position_embeddings`` = 16 and 20: the parity batch stays within it and
  generation (26 tokens) grows it, step by step. Past it, transformers' reference models keep a grown base
  until a shorter sequence than ``max_position_embeddings`` resets it, so a parity batch longer than that would
  depend on which test ran before; one within it does not.
"""

from __future__ import annotations

CONFIGS = {
    "llama": "LlamaConfig",
    "qwen2": "Qwen2Config",
    "qwen3": "Qwen3Config",
    "phi3": "Phi3Config",
    "gemma3": "Gemma3TextConfig",
}

CASES = {
    "llama-yarn-every-parameter": {
        "family": "llama",
        "hf_class": "LlamaForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=64,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 500.0,
                "factor": 4.0,
                "original_max_position_embeddings": 16,
                "beta_fast": 8.0,
                "beta_slow": 2.0,
                "mscale": 0.8,
                "mscale_all_dim": 1.0,
                "truncate": False,
            },
        ),
    },
    "llama-dynamic-ntk": {
        "family": "llama",
        "hf_class": "LlamaForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=16,  # generation grows the base past it
            rope_parameters={"rope_type": "dynamic", "rope_theta": 100.0, "factor": 4.0},
        ),
    },
    "qwen2-yarn-4x-keys-factor-fallback": {
        "family": "qwen2",
        "hf_class": "Qwen2ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=48,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32,
            rope_theta=1000.0,
            # Qwen's 4.x form (`type`); no factor: transformers takes 32 / 8
            rope_scaling={"type": "yarn", "factor": None, "original_max_position_embeddings": 8},
        ),
    },
    "qwen3-dynamic-ntk-4x-keys": {
        "family": "qwen3",
        "hf_class": "Qwen3ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            max_position_embeddings=20,
            rope_theta=10000.0,
            rope_scaling={"type": "dynamic", "factor": 3.0},
        ),
    },
    "phi3-longrope-partial-rotary": {
        "family": "phi3",
        "hf_class": "Phi3ForCausalLM",
        "config": dict(
            vocab_size=96,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            partial_rotary_factor=0.75,  # 12 of 16 dims: 6 pairs, 6 factors each
            rope_theta=1000.0,
            max_position_embeddings=32,  # no factor: the attention factor comes from 32 / 8
            original_max_position_embeddings=8,
            rope_scaling={
                "type": "longrope",
                "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
                "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0],
            },
            pad_token_id=0,
        ),
    },
    "gemma3-yarn-global-layers": {
        "family": "gemma3",
        "hf_class": "Gemma3ForCausalLM",
        "config": dict(
            vocab_size=80,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            query_pre_attn_scalar=16,
            sliding_window=5,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                "full_attention": {
                    "rope_type": "yarn",
                    "rope_theta": 10000.0,
                    "factor": 8.0,
                    "original_max_position_embeddings": 8,
                    "beta_fast": 4.0,
                },
            },
            max_position_embeddings=64,
        ),
    },
}

LONGROPE = {
    "scaling": "longrope",
    "scaling_factor": 4.0,
    "original_max_len": 8,  # the 12-token test batch runs on the long factors
    "short_factor": [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0],
    "long_factor": [1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0],
}
ZOO_MODELS = {
    "llama-tiny-longrope": ("llama-tiny", {"positional": {"type": "rope", **LONGROPE}}),
    "llama-tiny-dynamic-ntk": (
        "llama-tiny",
        {
            "max_len": 8,
            "positional": {"type": "rope", "scaling": "dynamic", "scaling_factor": 2.0, "original_max_len": 8},
        },
    ),
    "llama-tiny-yarn-attention-factor": (
        "llama-tiny",
        {
            "positional": {
                "type": "rope",
                "scaling": "yarn",
                "scaling_factor": 4.0,
                "original_max_len": 4,
                "attention_factor": 1.3,
            }
        },
    ),
}
