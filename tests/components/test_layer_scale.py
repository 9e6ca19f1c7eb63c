"""Layer scale (``block: {layer_scale: ...}``; CaiT, DINOv2, BEiT): off, the block is today's bit for bit; on, each
sub-layer's output is multiplied by its own learned vector, initialised to the recipe's value, and counted."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import zoo
from zoo.analysis import analytic_parameters, compare_counts, parameter_breakdown
from zoo.components.block import make_block

E = 8


class Scale(nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x, **_):
        return x * self.factor


def block(**options):
    norms = iter([Scale(f) for f in (2.0, 3.0, 5.0, 7.0)])
    return make_block(attention=Scale(11.0), ffn=Scale(13.0), norm=lambda: next(norms), width=E, **options)


def test_layer_scale_is_the_formula_and_each_sublayer_has_its_own_vector():
    b = block(layer_scale=0.5)
    with torch.no_grad():
        b.attention_scale.copy_(torch.linspace(0.1, 0.8, E))
        b.ffn_scale.copy_(torch.linspace(-1.0, 1.0, E))
    x = torch.randn(2, 3, E)
    h = x + b.attention_scale * (11 * 2 * x)  # x + γ1·a(n(x))
    torch.testing.assert_close(b(x), h + b.ffn_scale * (13 * 3 * h))  # + γ2·m(n(h))


def test_post_norm_layer_scale_scales_inside_the_norm():
    b = block(layer_scale=0.25, norm_position="post")
    x = torch.randn(2, 3, E)
    h = 2 * (x + 0.25 * 11 * x)
    torch.testing.assert_close(b(x), 3 * (h + 0.25 * 13 * h))


def test_layer_scale_starts_at_the_recipe_value():
    model = zoo.build("vit-tiny", **{"block.layer_scale": 1.0e-5})
    for b in model.blocks:
        for gamma in (b.attention_scale, b.ffn_scale):
            assert gamma.shape == (64,) and torch.equal(gamma, torch.full((64,), 1.0e-5))
            assert gamma.requires_grad
    with torch.no_grad():
        model.blocks[0].attention_scale.zero_()
    model.blocks[0].reset_layer_scale()
    assert torch.equal(model.blocks[0].attention_scale, torch.full((64,), 1.0e-5))


def test_off_is_today_bit_for_bit():
    torch.manual_seed(0)
    plain = zoo.build("vit-tiny").eval()
    off = zoo.build("vit-tiny", **{"block.layer_scale": None}).eval()
    assert sorted(plain.state_dict()) == sorted(off.state_dict())
    assert all(b.attention_scale is None and b.ffn_scale is None for b in off.blocks)
    off.load_state_dict(plain.state_dict())
    images = torch.randn(2, 1, 8, 8)
    assert torch.equal(plain(images).logits, off(images).logits)


def test_ones_leave_the_outputs_as_they_were():
    torch.manual_seed(0)
    plain = zoo.build("vit-tiny").eval()
    ones = zoo.build("vit-tiny", **{"block.layer_scale": 1.0}).eval()
    ones.load_state_dict(plain.state_dict(), strict=False)
    images = torch.randn(2, 1, 8, 8)
    torch.testing.assert_close(plain(images).logits, ones(images).logits)


@pytest.mark.parametrize(
    "recipe,first_block,vectors",
    [
        ("vit-tiny", "blocks.0", lambda r: 2 * r.num_layers),  # attention and FFN of each block
        ("t5-tiny", "encoder.blocks.0", lambda r: 2 * r.num_layers + 3 * r.num_decoder_layers),  # + cross-attention
    ],
)
def test_the_count_is_exact_and_declared(recipe, first_block, vectors):
    model = zoo.build(recipe, device="meta", **{"block.layer_scale": 0.1})
    base = zoo.count_parameters(zoo.build(recipe, device="meta"))
    counted, analytic = parameter_breakdown(model), analytic_parameters(model)
    assert not compare_counts(counted, analytic)
    added = vectors(model.recipe) * model.recipe.d_model
    assert zoo.count_parameters(model) - base == added == counted.by_kind["block"] == analytic.by_kind["block"]
    assert counted.by_layer[first_block] == analytic.by_layer[first_block]


def test_layer_scale_is_refused_in_a_parallel_block_and_must_be_positive():
    with pytest.raises(zoo.RecipeError, match="layer_scale scales each sub-layer's output apart"):
        zoo.load_recipe("vit-tiny", **{"block.layer_scale": 0.1, "block.parallel": True})
    with pytest.raises(zoo.RecipeError, match="layer_scale"):
        zoo.load_recipe("vit-tiny", **{"block.layer_scale": 0.0})
    with pytest.raises(ValueError, match="layer_scale needs width"):
        make_block(attention=Scale(1.0), ffn=Scale(1.0), norm=lambda: Scale(1.0), layer_scale=0.1)


def test_draw_shows_the_scale_on_each_sublayer():
    from zoo.draw import describe

    stacks, _ = describe(zoo.build("vit-tiny", device="meta", **{"block.layer_scale": 1.0e-5}))
    lines = [line for unit in stacks[0].kinds[0].units for line in unit.sublayer.lines]
    assert lines.count("output times learned γ (64), init 1e-05") == 2
