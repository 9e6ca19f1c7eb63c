"""RoPE's YaRN scaling (DeepSeek-V3) as transformers computes it: the speeds, the attention factor on cos and sin."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from zoo.components import positional as P

ORIGINAL = "original_max_position_embeddings"
CASES = [
    # (head_dim, theta, yarn parameters as a config gives them, max_position_embeddings)
    (64, 10000.0, {"factor": 40.0, ORIGINAL: 4096, "mscale": 1.0, "mscale_all_dim": 1.0}, 163840),  # DeepSeek-V3
    (8, 10000.0, {"factor": 4.0, ORIGINAL: 16}, 64),
    (16, 500.0, {"factor": 3.0, ORIGINAL: 8, "beta_fast": 4, "beta_slow": 2, "truncate": False}, 24),
    (8, 500.0, {"factor": 4.0, ORIGINAL: 16, "beta_fast": 8, "mscale": 0.8, "mscale_all_dim": 1.0}, 64),
    (8, 10000.0, {"factor": 2.0, ORIGINAL: 16, "attention_factor": 1.25}, 32),
]


def zoo_rope(head_dim: int, theta: float, params: dict) -> P.RotaryEmbedding:
    keys = {"beta_fast", "beta_slow", "truncate", "attention_factor", "mscale", "mscale_all_dim"}
    return P.RotaryEmbedding(
        head_dim,
        head_dim=head_dim,
        theta=theta,
        scaling="yarn",
        scaling_factor=params["factor"],
        original_max_len=params[ORIGINAL],
        **{k: v for k, v in params.items() if k in keys},
    )


def transformers_yarn(head_dim: int, theta: float, params: dict, max_positions: int):
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = transformers.DeepseekV3Config(
        qk_rope_head_dim=head_dim,
        max_position_embeddings=max_positions,
        rope_parameters={"rope_type": "yarn", "rope_theta": theta, **params},
    )
    return ROPE_INIT_FUNCTIONS["yarn"](config)


@pytest.mark.parametrize("head_dim, theta, params, max_positions", CASES)
def test_speeds_and_attention_factor_match_transformers(head_dim, theta, params, max_positions):
    expected, attention_factor = transformers_yarn(head_dim, theta, params, max_positions)
    rope = zoo_rope(head_dim, theta, params)
    speeds = P.scale_frequencies(P.inverse_frequencies(head_dim, theta), **rope.scaling)
    # transformers divides 1 / (factor · base^x) where zoo divides base^-x by factor: the same to a float32 ulp.
    torch.testing.assert_close(speeds, expected, rtol=2e-7, atol=0)
    assert rope.attention_factor == attention_factor


@pytest.mark.parametrize("head_dim, theta, params, max_positions", CASES[2:])
def test_rotation_matches_transformers_cos_and_sin(head_dim, theta, params, max_positions):
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf

    config = transformers.DeepseekV3Config(
        qk_rope_head_dim=head_dim,
        max_position_embeddings=max_positions,
        rope_parameters={"rope_type": "yarn", "rope_theta": theta, **params},
    )
    q, k = torch.randn(2, 3, 20, head_dim), torch.randn(2, 1, 20, head_dim)
    positions = P.positions_for(20)
    cos, sin = hf.DeepseekV3RotaryEmbedding(config)(q, positions)
    expected = hf.apply_rotary_pos_emb(q, k, cos, sin)
    actual = zoo_rope(head_dim, theta, params).rotate(q, k, positions)
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)


def test_fast_pairs_are_kept_and_slow_pairs_divided():
    speeds = P.inverse_frequencies(64, 10000.0)
    scaled = P.scale_frequencies(speeds, "yarn", factor=40.0, original_max_len=4096, theta=10000.0)
    assert torch.equal(scaled[:10], speeds[:10])  # turn more than 32 times in 4096 positions: kept
    torch.testing.assert_close(scaled[-8:], speeds[-8:] / 40)  # turn less than once: interpolated
    assert ((scaled <= speeds) & (scaled >= speeds / 40)).all()


def test_default_attention_factor_is_point_one_log_factor_plus_one():
    assert zoo_rope(8, 10000.0, {"factor": 4.0, ORIGINAL: 16}).attention_factor == (0.1 * math.log(4.0) + 1.0)
    assert P.RotaryEmbedding(8, head_dim=8, scaling="linear", scaling_factor=4.0).attention_factor == 1.0


def test_config_takes_the_yarn_fields():
    config = P.RopeConfig(scaling="yarn", scaling_factor=40.0, original_max_len=4096, mscale=1.0, mscale_all_dim=1.0)
    assert (config.beta_fast, config.beta_slow, config.truncate, config.attention_factor) == (32.0, 1.0, True, None)
    with pytest.raises(ValidationError, match="attention_factor\n  Input should be greater than 0"):
        P.RopeConfig(scaling="yarn", attention_factor=0.0)
