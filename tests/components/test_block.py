"""The block's layouts: each is its formula, and the recipe refuses the combinations that have none."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import zoo
from zoo.components.block import Block, make_block

E = 16


class Scale(nn.Module):
    """A stand-in sub-layer / norm whose output says which one ran: x * factor."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x, **_):
        return x * self.factor


def block(**layout) -> Block:
    norms = iter([Scale(f) for f in (2.0, 3.0, 5.0, 7.0)])
    return make_block(attention=Scale(11.0), ffn=Scale(13.0), norm=lambda: next(norms), **layout)


@pytest.mark.parametrize(
    "layout,formula",
    [
        ({}, lambda x: (x + 11 * 2 * x) + 13 * 3 * (x + 11 * 2 * x)),  # pre: norms 2 (attention), 3 (ffn)
        ({"norm_position": "post"}, lambda x: 3 * ((2 * (x + 11 * x)) + 13 * 2 * (x + 11 * x))),
        ({"parallel": True}, lambda x: x + 11 * 2 * x + 13 * 3 * x),  # GPT-NeoX: two norms of the same x
        ({"parallel": True, "shared_norm": True}, lambda x: x + 11 * 2 * x + 13 * 2 * x),  # GPT-J: one norm
    ],
)
def test_each_layout_is_its_formula(layout, formula):
    x = torch.randn(2, 3, E)
    torch.testing.assert_close(block(**layout)(x), formula(x))


def pre(x, r=0.5):
    h = x + r * 11 * 2 * x
    return h + r * 13 * 3 * h


def post(x, r=0.5):
    h = 2 * (x + r * 11 * x)
    return 3 * (h + r * 13 * h)


@pytest.mark.parametrize(
    "layout,formula",
    [
        ({}, pre),  # Granite: x + r·f(n(x)) for each sub-layer
        ({"norm_position": "post"}, post),
        ({"parallel": True}, lambda x: x + 0.5 * (11 * 2 * x + 13 * 3 * x)),
    ],
)
def test_residual_multiplier_scales_what_each_sublayer_adds(layout, formula):
    x = torch.randn(2, 3, E)
    torch.testing.assert_close(block(residual_multiplier=0.5, **layout)(x), formula(x))


def test_residual_multiplier_at_its_default_changes_nothing_bit_for_bit():
    torch.manual_seed(0)
    plain = zoo.build("llama-tiny").eval()
    ones = zoo.build("llama-tiny", **{"block.residual_multiplier": 1.0}).eval()
    ones.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 256, (2, 7))
    assert torch.equal(plain(ids).logits, ones(ids).logits)
    with pytest.raises(zoo.RecipeError, match="residual_multiplier"):
        zoo.load_recipe("llama-tiny", **{"block.residual_multiplier": 0.0})


def test_sandwich_normalises_each_sublayer_output_too():
    # Norm order of construction: attention 2, attention_post 3, ffn 5, ffn_post 7.
    x = torch.randn(2, 3, E)
    h = x + 3 * (11 * (2 * x))
    torch.testing.assert_close(block(norm_position="sandwich")(x), h + 7 * (13 * (5 * h)))


def test_output_normalises_each_sublayer_output_and_not_its_input():
    # OLMo 2: x + n(f(x)). Norm order of construction: attention_post 2, ffn_post 3.
    x = torch.randn(2, 3, E)
    h = x + 2 * (11 * x)
    torch.testing.assert_close(block(norm_position="output")(x), h + 3 * (13 * h))


def test_output_has_one_norm_per_sublayer_as_many_parameters_as_pre():
    pre = zoo.build("gpt-tiny")
    out = zoo.build("gpt-tiny", block={"norm_position": "output"})
    b = out.blocks[0]
    assert isinstance(b.attention_norm, nn.Identity) and isinstance(b.ffn_norm, nn.Identity)
    assert not isinstance(b.attention_post_norm, nn.Identity) and not isinstance(b.ffn_post_norm, nn.Identity)
    assert zoo.count_parameters(out) == zoo.count_parameters(pre)
    assert out.recipe.block.pre_norm  # the stream is never normalised in a block: the stack ends with a norm
    assert isinstance(out.embed_norm, nn.Identity) and not isinstance(out.final_norm, nn.Identity)


@torch.no_grad()
def test_output_block_equals_a_hand_written_one():
    torch.manual_seed(0)
    model = zoo.build("llama-tiny", block={"norm_position": "output"}).eval()
    b = model.blocks[0]
    x = torch.randn(2, 5, 64)
    positions = torch.arange(5)[None]
    h = x + b.attention_post_norm(b.attention(x, positions=positions, pos=model.positional))
    expected = h + b.ffn_post_norm(b.ffn(h))
    torch.testing.assert_close(b(x, positions=positions, pos=model.positional), expected, rtol=0, atol=0)


def test_shared_norm_has_no_ffn_norm_and_fewer_parameters():
    two = zoo.build("gpt-tiny", block={"parallel": True})
    one = zoo.build("gpt-tiny", block={"parallel": True, "shared_norm": True})
    assert one.blocks[0].ffn_norm is None and two.blocks[0].ffn_norm is not None
    assert zoo.count_parameters(two) - zoo.count_parameters(one) == len(two.blocks) * 2 * 64  # LayerNorm 2E


@torch.no_grad()
def test_parallel_decoder_decodes_through_its_cache():
    torch.manual_seed(0)
    model = zoo.build("gpt-tiny", block={"parallel": True, "shared_norm": True}).eval()
    x = torch.randint(0, 256, (2, 9))
    cache = model.new_cache(2, 9)
    steps = [model(x[:, :4], cache=cache).logits] + [model(x[:, t : t + 1], cache=cache).logits for t in range(4, 9)]
    torch.testing.assert_close(torch.cat(steps, 1), model(x).logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "block_options,message",
    [
        (
            {"parallel": True, "norm_position": "post"},
            "a parallel block normalises its input (pre-norm), not norm_position post",
        ),
        ({"shared_norm": True}, "shared_norm needs parallel: true (a sequential block normalises each input anew)"),
        (
            {"parallel": True, "norm_position": "output"},
            "a parallel block normalises its input (pre-norm), not norm_position output",
        ),
    ],
)
def test_layouts_without_a_formula_are_refused(block_options, message):
    with pytest.raises(zoo.RecipeError) as err:
        zoo.load_recipe("gpt-tiny", block=block_options)
    assert f"block: {message}" in str(err.value)


def test_each_layout_is_a_class_chosen_at_construction():
    assert type(block()) is Block
    assert type(block(norm_position="post")).__name__ == "PostNormBlock"
    assert type(block(parallel=True)).__name__ == "ParallelBlock"
    with pytest.raises(ValueError, match="Block has no post layout: make_block builds the class of each"):
        Block(attention=Scale(11.0), ffn=Scale(13.0), norm=lambda: Scale(2.0), norm_position="post")
