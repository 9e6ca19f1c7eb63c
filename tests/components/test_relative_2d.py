"""``relative_2d``: BEiT's 2-D relative position bias. Its index is transformers' (the [CLS] entries included), its
bias is transformers' table lookup, a layer's own table and a shared one are both counted, and images of another
grid are refused with the reason."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.analysis import analytic_parameters, compare_counts, parameter_breakdown
from zoo.components.positional import Relative2DBias, positions_for, relative_2d_index

transformers = pytest.importorskip("transformers")
from transformers.models.beit.modeling_beit import BeitRelativePositionBias  # noqa: E402


@pytest.mark.parametrize("grid", [1, 2, 3, 5])
def test_the_index_is_transformers(grid):
    tokens = positions_for(1 + grid * grid)
    expected = BeitRelativePositionBias.generate_relative_position_index((grid, grid))
    assert torch.equal(relative_2d_index(tokens, tokens, grid)[0], expected)


def test_the_cls_entries_are_the_last_three_rows():
    grid, entries = 3, (2 * 3 - 1) ** 2 + 3
    index = relative_2d_index(positions_for(10), positions_for(10), grid)[0]
    assert index[0, 0] == entries - 1  # [CLS] to itself
    assert (index[0, 1:] == entries - 3).all()  # [CLS] to a patch
    assert (index[1:, 0] == entries - 2).all()  # a patch to [CLS]
    assert index[1:, 1:].max() < entries - 3 and index[5, 5] == (grid - 1) * (2 * grid - 1) + grid - 1  # offset 0


def test_the_bias_is_transformers_lookup():
    config = transformers.BeitConfig(image_size=12, patch_size=3, num_attention_heads=3, hidden_size=12)
    hf = BeitRelativePositionBias(config)
    ours = Relative2DBias(12, num_heads=3, image_size=12, patch_size=3)
    torch.manual_seed(0)
    with torch.no_grad():
        hf.relative_position_bias_table.normal_()
        ours.relative_position_bias_table.copy_(hf.relative_position_bias_table)
    tokens = positions_for(17)
    torch.testing.assert_close(ours.score_bias(tokens, tokens), hf((4, 4)))
    assert ours.score_bias(tokens, tokens).shape == (1, 3, 17, 17)


def test_the_table_starts_at_zero_and_has_an_entry_per_offset_and_head():
    bias = Relative2DBias(8, num_heads=4, image_size=8, patch_size=2)
    assert bias.relative_position_bias_table.shape == ((2 * 4 - 1) ** 2 + 3, 4)
    assert not bias.relative_position_bias_table.any()


RELATIVE = {"type": "relative_2d"}


@pytest.mark.parametrize(
    "options,tables",
    [
        ({"positional": {"type": "relative_2d"}}, 1),  # one table the layers share
        (
            {
                "positional": "none",
                "attention": {"type": "mha", "num_heads": 4, "position_bias": {"type": "relative_2d"}},
            },
            2,
        ),
    ],
)
def test_shared_and_per_layer_tables_are_counted_exactly(options, tables):
    model = zoo.build("vit-tiny", device="meta", **options)
    counted, analytic = parameter_breakdown(model), analytic_parameters(model)
    assert not compare_counts(counted, analytic)
    plain = zoo.build("vit-tiny", device="meta", positional="none")
    assert zoo.count_parameters(model) - zoo.count_parameters(plain) == tables * ((2 * 4 - 1) ** 2 + 3) * 4


def test_the_table_changes_the_scores():
    torch.manual_seed(0)
    model = zoo.build("vit-tiny", positional={"type": "relative_2d"}).eval()
    images = torch.randn(2, 1, 8, 8)
    before = model(images).logits
    with torch.no_grad():
        model.positional.relative_position_bias_table.normal_()
    assert not torch.allclose(before, model(images).logits)


def test_images_of_another_grid_are_refused():
    model = zoo.build("beit-tiny").eval()
    with pytest.raises(
        ValueError, match="relative_2d holds offsets of a 4 x 4 patch grid and \\[CLS\\] \\(17 tokens\\)"
    ):
        model(torch.randn(1, 1, 12, 12))


def test_a_recipe_without_a_patch_grid_is_refused():
    with pytest.raises(zoo.RecipeError, match="relative_2d biases a grid of image patches"):
        zoo.load_recipe("bert-tiny", positional={"type": "relative_2d"})
