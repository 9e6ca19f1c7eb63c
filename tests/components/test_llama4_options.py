"""Llama 4's component options: chunked attention (over positions, a left-padded row's chunks from its first
token), q/k norms after RoPE, temperature-tuned queries, the clamp of q, k and v (DBRX), the MoE's weighted input
(against transformers' Llama4TextMoe), each option's refusals, and Llama 3 scaling with equal factors."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.components.attention import Chunks, GQAConfig, GroupedQueryAttention, QueryTemperature, chunked_mask
from zoo.components.ffn import SwiGLU
from zoo.components.moe import MoE
from zoo.config import BuildContext

transformers = pytest.importorskip("transformers")


def test_a_chunk_is_the_positions_that_share_an_integer_division():
    pos = torch.arange(7)
    seen = chunked_mask(pos, pos, 3)
    expected = torch.tensor([[i // 3 == j // 3 for j in range(7)] for i in range(7)])
    assert torch.equal(seen, expected)
    assert Chunks(3).window == 3 and Chunks(3).by_position
    with pytest.raises(ValueError, match=r"chunk_size \(0\) must be >= 1"):
        Chunks(0)


def test_chunks_of_a_left_padded_row_start_at_its_first_token_as_transformers_does():
    from transformers.masking_utils import chunked_overlay

    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1]])
    left = (mask.cumsum(-1) == 0).sum(-1)
    overlay = chunked_overlay(3, left)
    idx = torch.arange(7)
    hf = torch.stack([overlay(b, 0, idx[:, None], idx[None, :]) for b in range(2)])  # (2, L, S)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    ours = chunked_mask(positions, positions, 3)
    real = mask.bool()[:, None, :] & mask.bool()[:, :, None]
    assert torch.equal(ours & real, hf & real)


def attention(**options) -> GroupedQueryAttention:
    torch.manual_seed(0)
    return GroupedQueryAttention.from_options(16, num_heads=4, num_kv_heads=2, causal=True, **options).eval()


def test_a_chunked_attention_sees_its_chunk_only_and_decodes_through_a_rolling_cache():
    layer, full = attention(chunk_size=3), attention()
    x = torch.randn(2, 8, 16)
    with torch.no_grad():
        out = layer(x)
        assert torch.allclose(out[:, :3], full(x[:, :3]), atol=1e-6)  # the first chunk: plain causal attention
        assert torch.allclose(out[:, 3:6], full(x[:, 3:6], positions=torch.arange(3, 6)[None]), atol=1e-6)
        cache = layer.new_cache(2, 8)
        assert cache.capacity == 3
        steps = [layer(x[:, :5], cache=cache)] + [layer(x[:, i : i + 1], cache=cache) for i in range(5, 8)]
    assert torch.allclose(torch.cat(steps, dim=1), out, atol=1e-6)


def test_the_temperature_is_transformers_formula_of_the_sequence_index():
    q = torch.randn(1, 2, 40, 4)
    index = torch.arange(40)
    scaled = QueryTemperature(8, 0.1)(q, index)
    factor = torch.log1p(torch.floor((index.float() + 1.0) / 8)) * 0.1 + 1.0  # Llama4TextAttention's
    assert torch.equal(scaled, q * factor[:, None])
    assert torch.equal(scaled[..., :7, :], q[..., :7, :])  # 1 below the first floor


def test_qk_norm_after_rope_normalises_the_rotated_heads_and_clip_qkv_clamps_first():
    from zoo.components.norm import RMSNorm
    from zoo.components.positional import RotaryEmbedding

    rope = RotaryEmbedding(16, head_dim=4, interleaved=True)
    norm = dict(qk_norm=lambda width: RMSNorm(width, affine=False))
    layer, before = attention(**norm, qk_norm_position="after_rope"), attention(**norm)
    x = torch.randn(1, 5, 16)
    with torch.no_grad():
        q = layer.q_proj(x).view(1, 5, 4, 4).transpose(1, 2)
        k = layer.k_proj(x).view(1, 5, 2, 4).transpose(1, 2)
        q, k = rope.rotate(q, k, torch.arange(5)[None])
        q, k = (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) for t in (q, k))
        _, rotated_k, *_ = layer._keys_values(x, q, context=None, mask=None, positions=None, pos=rope, cache=None)
        assert torch.allclose(rotated_k, k, atol=1e-6)
        assert not torch.allclose(layer(x, pos=rope), before(x, pos=rope))
        clipped = attention(clip_qkv=0.1)
        assert clipped._heads(clipped.v_proj, x * 100, 2).abs().max() <= 0.1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"chunk_size": 4, "window": 3}, "chunk_size is a pattern of keys of its own"),
        ({"qk_norm_position": "after_rope"}, "qk_norm_position after_rope normalises each rotated head"),
        (
            {"qk_norm": "rmsnorm", "qk_norm_scope": "projection", "qk_norm_position": "after_rope"},
            "it needs qk_norm_scope head",
        ),
        ({"temperature_floor_scale": 8}, "temperature tuning needs both"),
    ],
)
def test_options_that_do_not_go_together_are_refused(options, message):
    config = GQAConfig(num_heads=4, num_kv_heads=2, **options)
    problems = config.check(BuildContext(d_model=16, causal=True, head_dim=4, positional="rope"))
    assert any(message in p for p in problems), problems


def test_a_chunked_recipe_counts_only_its_chunk_in_the_kv_cache_estimate():
    recipe = zoo.load_recipe("llama-tiny", **{"attention.chunk_size": 4})
    assert recipe.attention.cost(recipe.context(causal=True)).window == 4


def test_the_weighted_input_moe_is_transformers_llama4_moe():
    from transformers.models.llama4.modeling_llama4 import Llama4TextMoe

    config = transformers.Llama4TextConfig(
        hidden_size=16, intermediate_size=8, num_local_experts=4, num_experts_per_tok=2
    )
    torch.manual_seed(0)
    hf = Llama4TextMoe(config).eval()
    with torch.no_grad():
        for p in hf.parameters():  # the experts' tensors are torch.empty until a model initialises them
            p.normal_(0, 0.3)
        ours = MoE(
            16,
            num_experts=4,
            top_k=2,
            expert=lambda: SwiGLU(16, hidden=8),
            shared_expert=lambda: SwiGLU(16, hidden=8),
            scoring="sigmoid",
            normalize=False,
            weighted_input=True,
        ).eval()
        ours.router.weight.copy_(hf.router.weight)
        for e in range(4):
            w = ours.experts.per_expert()
            gate_up, down = hf.experts.gate_up_proj[e].t(), hf.experts.down_proj[e].t()
            w[f"{e}.gate_proj.weight"].copy_(gate_up[:8])
            w[f"{e}.up_proj.weight"].copy_(gate_up[8:])
            w[f"{e}.down_proj.weight"].copy_(down)
        for p in ("gate_proj", "up_proj", "down_proj"):
            getattr(ours.shared_expert, p).weight.copy_(getattr(hf.shared_expert, p).weight)
        x = torch.randn(2, 5, 16)
        expected = hf(x)[0].view(2, 5, 16)
        assert torch.allclose(ours(x), expected, atol=1e-5)
        assert "weighted_input=True" in repr(ours)


def test_llama3_scaling_with_equal_factors_is_transformers():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from zoo.components.positional import RotaryEmbedding

    config = transformers.Llama4TextConfig(head_dim=16, num_attention_heads=2, hidden_size=32)
    config.rope_parameters = {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 16.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 1.0,
        "original_max_position_embeddings": 64,
    }
    expected, _ = ROPE_INIT_FUNCTIONS["llama3"](config)
    rope = RotaryEmbedding(
        32,
        head_dim=16,
        theta=500000.0,
        scaling="llama3",
        scaling_factor=16.0,
        low_freq_factor=1.0,
        high_freq_factor=1.0,
        original_max_len=64,
    )
    assert torch.equal(rope.speeds(torch.arange(4)[None]), expected)
