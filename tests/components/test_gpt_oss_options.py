"""gpt-oss's component options: attention sinks (every kernel exact, -inf sinks are plain attention, cached decoding
equals recomputation), the clamped SwiGLU (defaults bit-identical to SwiGLU; gpt-oss's formula) and the router's
bias (its softmax over the top-k logits)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.components import kernels
from zoo.components.attention import GQAConfig, GroupedQueryAttention
from zoo.components.attention.sinks import with_sinks
from zoo.components.ffn import GatedMLP, SwiGLU, SwiGLUConfig
from zoo.components.moe import GroupedExperts, MoE, MoEConfig
from zoo.config import BuildContext
from zoo.plugins import get_registry

KERNELS = sorted(c.name for c in get_registry() if c.kind == "kernel")


def gpt_oss_attention(q, k, v, sinks, scale, mask=None, bias=None):
    """transformers' gpt-oss ``eager_attention_forward``: the sink is a logit column of the softmax, then dropped."""
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) * scale
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    combined = torch.cat([scores, sinks.reshape(1, -1, 1, 1).expand(*scores.shape[:-1], 1)], dim=-1)
    probs = (combined - combined.max(-1, keepdim=True).values).softmax(-1)[..., :-1]
    return probs @ v


CASES = {  # (query length, key length, mask, bias, causal, scale)
    "plain": (5, 7, False, False, False, None),
    "mask": (5, 7, True, False, False, None),
    "bias": (5, 7, False, True, False, None),
    "mask+bias": (5, 7, True, True, False, 0.3),
    "causal": (7, 7, False, False, True, None),
    "causal-after-cache": (3, 7, False, True, True, None),
    "one-query": (1, 7, False, False, True, 0.3),
}


@pytest.mark.parametrize("kernel_name", KERNELS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_kernel_attends_to_the_sink_as_gpt_oss_does(kernel_name, case):
    query_len, key_len, masked, biased, causal, scale = CASES[case]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, query_len, 8, generator=g)
    k, v = (torch.randn(2, 2, key_len, 8, generator=g) for _ in range(2))
    sinks = torch.randn(4, generator=g)
    mask = torch.rand(2, 1, query_len, key_len, generator=g) > 0.4 if masked else None
    if mask is not None:
        mask[..., 0] = True  # every row sees a key (a row that sees none: the test below)
    bias = torch.randn(1, 4, query_len, key_len, generator=g) if biased else None
    scale = 8**-0.5 if scale is None else scale
    expected_mask = kernels.causal_mask(query_len, key_len) if causal else mask
    expected = gpt_oss_attention(q, k, v, sinks, scale, expected_mask, bias)
    q, k, v, mask, bias = with_sinks(q, k, v, mask, bias, sinks, scale)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flex_attention outside torch.compile
        out = getattr(kernels, kernel_name)(q, k, v, mask=mask, bias=bias, causal=causal, scale=scale)
    torch.testing.assert_close(out, expected)


def test_a_row_that_sees_no_key_gives_zeros_and_minus_infinite_sinks_give_plain_attention():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(1, 4, 3, 8, generator=g), torch.randn(1, 2, 5, 8, generator=g), torch.randn(1, 2, 5, 8)
    mask = torch.ones(1, 1, 3, 5, dtype=torch.bool)
    mask[0, 0, 1] = False
    for sinks in (torch.randn(4, generator=g), torch.full((4,), float("-inf"))):
        sq, sk, sv, smask, _ = with_sinks(q, k, v, mask, None, sinks, 0.5)
        out = kernels.eager(sq, sk, sv, mask=smask, scale=0.5)
        assert torch.equal(out[0, :, 1], torch.zeros(4, 8)) and out.isfinite().all()
    plain = kernels.eager(q, k, v, mask=mask, scale=0.5)
    torch.testing.assert_close(out, plain)


def attention(sinks: bool, **options) -> GroupedQueryAttention:
    torch.manual_seed(0)
    return GroupedQueryAttention(16, num_heads=4, num_kv_heads=2, head_dim=6, sinks=sinks, causal=True, **options)


def test_minus_infinite_sinks_are_plain_attention_in_every_kernel():
    plain, sunk = attention(False), attention(True)
    sunk.load_state_dict({**plain.state_dict(), "sinks": torch.full((4,), float("-inf"))})
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        expected = plain(x)
        for name in KERNELS:
            sunk.kernel = getattr(kernels, name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # flex_attention outside torch.compile
                torch.testing.assert_close(sunk(x), expected, msg=name)


def test_sinks_are_a_parameter_per_query_head_counted_and_shown():
    module = attention(True)
    assert module.sinks.shape == (4,) and torch.equal(module.sinks, torch.zeros(4))
    config = GQAConfig(num_heads=4, num_kv_heads=2, head_dim=6, sinks=True)
    plain = GQAConfig(num_heads=4, num_kv_heads=2, head_dim=6)
    ctx = BuildContext(d_model=16, causal=True)
    assert config.cost(ctx).params == plain.cost(ctx).params + 4
    assert "sinks=True" in repr(module)


def test_sinks_refuse_a_softcap():
    with pytest.raises(ValueError, match="sinks with softcap"):
        attention(True, softcap=5.0)
    problems = GQAConfig(num_heads=4, num_kv_heads=2, sinks=True, softcap=5.0).check(BuildContext(d_model=16))
    assert any("sinks with softcap" in p for p in problems)


@pytest.mark.parametrize("window", [None, 3])
def test_cached_decoding_with_sinks_equals_recomputation(window):
    torch.manual_seed(0)
    attention = {"type": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 6, "sinks": True, "window": window}
    model = zoo.build("llama-tiny", **{"attention": attention, "num_layers": 2}).eval()
    with torch.no_grad():
        for block in model.blocks:
            block.attention.sinks.normal_()
        ids = torch.randint(0, model.recipe.vocab_size, (2, 9))
        full = model(ids).logits
        cache = model.new_cache(2, 9)
        steps = [model(ids[:, :4], cache=cache).logits]
        steps += [model(ids[:, i : i + 1], cache=cache).logits for i in range(4, 9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


# ---------------------------------------------------------------------------------------------- clamped SwiGLU


def test_swiglu_defaults_are_bit_identical_to_plain_swiglu():
    torch.manual_seed(0)
    ffn, x = SwiGLU(16, hidden=24, bias=True), torch.randn(3, 5, 16)
    expected = ffn.down_proj(F.silu(ffn.gate_proj(x)) * ffn.up_proj(x))
    assert torch.equal(ffn(x), expected)
    config = SwiGLUConfig()
    assert (config.alpha, config.limit, config.up_shift) == (1.0, None, 0.0)
    assert isinstance(ffn.act, torch.nn.SiLU)


def gpt_oss_gate(gate_up: torch.Tensor, alpha: float, limit: float) -> torch.Tensor:
    """transformers' ``GptOssExperts._apply_gate``, gate and up interleaved."""
    gate, up = gate_up[..., ::2], gate_up[..., 1::2]
    gate = gate.clamp(min=None, max=limit)
    up = up.clamp(min=-limit, max=limit)
    glu = gate * torch.sigmoid(gate * alpha)
    return (up + 1) * glu


def test_clamped_swiglu_is_gpt_oss_gate_bit_for_bit():
    torch.manual_seed(0)
    ffn = SwiGLU(16, hidden=24, bias=True, alpha=1.702, limit=0.3, up_shift=1.0)
    x = torch.randn(3, 5, 16)
    gate, up = ffn.gate_proj(x), ffn.up_proj(x)
    assert (gate > 0.3).any() and (up.abs() > 0.3).any()  # the clamps act
    interleaved = torch.stack([gate, up], dim=-1).flatten(-2)
    assert torch.equal(ffn(x), ffn.down_proj(gpt_oss_gate(interleaved, 1.702, 0.3)))


def test_stacked_experts_clamp_as_their_module_does():
    torch.manual_seed(0)
    expert = GatedMLP(16, hidden=24, bias=True, alpha=1.702, limit=0.3, up_shift=1.0)
    stacked = GroupedExperts.of(expert, 3)
    assert (stacked.limit, stacked.up_shift) == (0.3, 1.0)
    x = torch.randn(7, 16)
    for e in range(3):
        one = GatedMLP(16, hidden=24, bias=True, alpha=1.702, limit=0.3, up_shift=1.0)
        weights = stacked.per_expert()
        one.load_state_dict({n.split(".", 1)[1]: t for n, t in weights.items() if n.startswith(f"{e}.")})
        assert torch.equal(stacked(x, e), one(x))


def test_alpha_is_the_gain_of_silu_only():
    with pytest.raises(ValueError, match="alpha is the gain of silu's sigmoid"):
        GatedMLP(16, hidden=8, activation="gelu", alpha=1.702)
    with pytest.raises(ValueError):
        SwiGLUConfig(limit=0.0)


# ---------------------------------------------------------------------------------------------- router bias


def gpt_oss_router(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, top_k: int):
    """transformers' ``GptOssTopKRouter``: a biased linear, the top-k logits, a softmax over them."""
    logits = F.linear(x, weight, bias)
    top, indices = torch.topk(logits, top_k, dim=-1)
    return F.softmax(top, dim=1, dtype=top.dtype), indices


def test_a_biased_router_weights_by_a_softmax_over_the_top_k_logits():
    torch.manual_seed(0)
    moe = MoE(16, num_experts=5, top_k=3, expert=lambda: GatedMLP(16, hidden=8), router_bias=True)
    with torch.no_grad():
        moe.router.bias.copy_(torch.randn(5) * 3)  # a bias large enough to change the choice
    x = torch.randn(40, 16)
    weights, indices, _ = moe.route(x)
    expected_weights, expected_indices = gpt_oss_router(x, moe.router.weight, moe.router.bias, 3)
    assert torch.equal(indices, expected_indices)
    torch.testing.assert_close(weights, expected_weights)
    unbiased = moe.router(x) - moe.router.bias
    assert not torch.equal(unbiased.topk(3).indices, indices)


def test_router_bias_is_a_parameter_counted_by_the_config():
    moe = MoE(16, num_experts=5, top_k=2, expert=lambda: GatedMLP(16, hidden=8), router_bias=True)
    assert moe.router.bias.shape == (5,) and "router_bias=True" in repr(moe)
    plain = MoE(16, num_experts=5, top_k=2, expert=lambda: GatedMLP(16, hidden=8))
    assert plain.router.bias is None and MoEConfig.model_fields["router_bias"].default is False
    count = sum(p.numel() for p in moe.parameters()) - sum(p.numel() for p in plain.parameters())
    assert count == 5


def test_a_sigmoid_router_scores_with_its_bias():
    torch.manual_seed(0)
    moe = MoE(16, num_experts=4, top_k=2, expert=lambda: GatedMLP(16, hidden=8), router_bias=True, scoring="sigmoid")
    with torch.no_grad():
        moe.router.bias.normal_()
    x = torch.randn(6, 16)
    probs = moe.route(x)[2]
    torch.testing.assert_close(probs, moe.router(x).sigmoid())
