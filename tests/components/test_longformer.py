"""Longformer attention (``attention: longformer``, LED's encoder): its chunks compute exactly the dense band, a window
that covers the sequence without global tokens is multi-head attention, global rows use their own projections, the
declared parameters are the modules', and what cannot work is refused with the reason."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.components.attention import LongformerAttention, LongformerConfig, MultiHeadAttention
from zoo.components.kernels import eager
from zoo.config import BuildContext
from zoo.errors import RecipeError

ENCODER = {
    "name": "longformer-test",
    "architecture": "encoder",
    "d_model": 32,
    "num_layers": 2,
    "vocab_size": 61,
    "max_len": 40,
    "norm_position": "post",
    "positional": "learned",
    "attention": {"type": "longformer", "num_heads": 4, "window": 4, "global_tokens": 1},
    "norm": {"type": "layernorm", "eps": 1e-5},
    "ffn": {"type": "mlp", "hidden": 64},
    "head": "mlm",
}


def dense(attention: LongformerAttention, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
    """The attention written out over the whole (L, L) mask: the band, the global columns and rows, padding."""
    n, L, _ = x.shape
    index = torch.arange(L)
    near = (index[:, None] - index[None, :]).abs() <= attention.attention_window // 2
    seen = (near | (index < attention.global_tokens)[None, :]) & padding[:, None, None, :]  # (N, 1, L, L)
    heads = attention._heads
    q, k, v = (heads(p, x, attention.num_heads) for p in (attention.q_proj, attention.k_proj, attention.v_proj))
    y = eager(q, k, v, mask=seen)
    g = attention.global_tokens
    if g:
        qg = heads(attention.q_global, x, attention.num_heads)
        kg, vg = heads(attention.k_global, x, attention.num_heads), heads(attention.v_global, x, attention.num_heads)
        rows = eager(qg, kg, vg, mask=padding[:, None, None, :])
        y = torch.where((index < g)[None, None, :, None], rows, y)
    return attention.o_proj(y.transpose(1, 2).reshape(n, L, -1))


@pytest.mark.parametrize(("window", "global_tokens", "length"), [(4, 0, 23), (4, 1, 23), (6, 3, 17), (2, 2, 9)])
def test_the_chunks_compute_the_dense_band(window, global_tokens, length):
    torch.manual_seed(0)
    attention = LongformerAttention(32, num_heads=4, window=window, global_tokens=global_tokens).eval()
    x = torch.randn(3, length, 32)
    padding = torch.ones(3, length, dtype=torch.bool)
    padding[1, -5:] = False
    padding[2, :3] = False  # a padded first token is no global token: no query sees it
    with torch.no_grad():
        got = attention(x, mask=padding[:, None, None, :])
        expected = dense(attention, x, padding)
    torch.testing.assert_close(got[padding], expected[padding], rtol=0, atol=1e-5)


def test_a_window_over_the_whole_sequence_without_global_tokens_is_multi_head_attention():
    torch.manual_seed(0)
    plain = MultiHeadAttention(32, num_heads=4).eval()
    local = LongformerAttention(32, num_heads=4, window=16).eval()
    local.load_state_dict(plain.state_dict(), strict=False)
    x = torch.randn(2, 7, 32)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 5:] = False
    with torch.no_grad():
        torch.testing.assert_close(local(x, mask=mask), plain(x, mask=mask), rtol=0, atol=1e-6)


def test_the_global_rows_use_their_own_projections_and_the_others_do_not():
    torch.manual_seed(0)
    attention = LongformerAttention(16, num_heads=2, window=2, global_tokens=1)
    x = torch.randn(1, 8, 16)
    attention(x).sum().backward()
    for name in ("q_global", "k_global", "v_global"):
        assert getattr(attention, name).weight.grad.abs().sum() > 0
    attention.zero_grad()
    out = attention(x)
    out[:, 1:].sum().backward()  # the other rows: none of the global projections
    assert all(getattr(attention, n).weight.grad.abs().sum() == 0 for n in ("q_global", "k_global", "v_global"))


@pytest.mark.parametrize("bias", [True, False])
def test_the_declared_parameters_are_the_modules(bias):
    config = LongformerConfig(num_heads=4, window=4, global_tokens=1, bias=bias)
    module = LongformerAttention(32, num_heads=4, window=4, global_tokens=1, bias=bias)
    assert config.cost(BuildContext(d_model=32)).params == sum(p.numel() for p in module.parameters())


def test_the_cost_counts_the_band_and_the_global_keys():
    cost = LongformerConfig(num_heads=4, window=8, global_tokens=2).cost(BuildContext(d_model=32))
    assert cost.window == 8 + 1 + 2
    assert cost.matmul == 6 * 32 * 32  # q, k, v, o and the global keys and values of every token
    assert LongformerConfig(num_heads=4, window=8).cost(BuildContext(d_model=32)).matmul == 4 * 32 * 32


def test_the_label_says_the_window_and_the_global_tokens():
    recipe = zoo.load_recipe(ENCODER)
    label = recipe.attention.label("attention", recipe.context(), None)
    text = " ".join([label.title, *label.lines])
    assert "sliding window 4 (2 keys each side); the first token global, with q/k/v of their own" in text


def test_an_odd_window_is_refused():
    with pytest.raises(RecipeError, match=r"window \(5\) must be even: the band reaches window / 2 keys"):
        zoo.load_recipe(ENCODER, attention={"window": 5})


def test_a_decoder_stack_is_refused():
    recipe = {**ENCODER, "architecture": "encoder-decoder", "head": "lm", "pad_token_id": 0}
    with pytest.raises(RecipeError, match="longformer attention is an encoder's bidirectional self-attention"):
        zoo.load_recipe(recipe)


def test_an_encoder_with_it_trains():
    torch.manual_seed(0)
    model = zoo.build(ENCODER)
    ids = torch.randint(1, 61, (2, 19))
    out = model(ids, labels=ids)
    out.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
