"""GLM-4 and GLM-4-0414: interleaved RoPE over half of each head, q/k/v biases, fused gate_up; 0414's sandwich
norms."""

from __future__ import annotations

CONFIGS = {"glm": "GlmConfig", "glm4": "Glm4Config"}

TINY = dict(
    vocab_size=96,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    pad_token_id=0,
)
OTHER = dict(
    vocab_size=80,
    hidden_size=48,
    intermediate_size=80,
    num_hidden_layers=3,
    num_attention_heads=6,
    num_key_value_heads=6,
    head_dim=12,
    max_position_embeddings=64,
    attention_bias=False,
    tie_word_embeddings=True,
    rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 2 / 3},
    pad_token_id=0,
)
CASES = {
    "glm-half-rotary": {"family": "glm", "hf_class": "GlmForCausalLM", "config": TINY},
    "glm-two-thirds-rotary-unbiased-tied": {"family": "glm", "hf_class": "GlmForCausalLM", "config": OTHER},
    "glm4-half-rotary": {"family": "glm4", "hf_class": "Glm4ForCausalLM", "config": TINY},
    "glm4-two-thirds-rotary-unbiased-tied": {"family": "glm4", "hf_class": "Glm4ForCausalLM", "config": OTHER},
}

GLM_4_9B = {
    "attention_bias": True,
    "attention_dropout": 0.0,
    "eos_token_id": [151329, 151336, 151338],
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 13696,
    "max_position_embeddings": 131072,
    "num_attention_heads": 32,
    "num_hidden_layers": 40,
    "num_key_value_heads": 2,
    "pad_token_id": 151329,
    "partial_rotary_factor": 0.5,
    "rms_norm_eps": 1.5625e-07,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "vocab_size": 151552,
}
PUBLISHED = {
    "glm-4-9b": ("GlmConfig", {**GLM_4_9B, "architectures": ["GlmForCausalLM"], "model_type": "glm"}),
    "glm-4-9b-0414": (
        "Glm4Config",
        {**GLM_4_9B, "architectures": ["Glm4ForCausalLM"], "model_type": "glm4", "max_position_embeddings": 32768},
    ),
}
