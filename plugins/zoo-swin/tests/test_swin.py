"""zoo-swin: the component contract, the windows and shift mask equal to transformers', exact sizes, HF parity."""

from __future__ import annotations

import pytest
import torch

zoo_swin = pytest.importorskip("zoo_swin", reason="pip install -e plugins/zoo-swin")

from zoo_swin import (  # noqa: E402
    SwinWindowAttention,
    relative_position_index,
    shift_mask,
    window_partition,
    window_reverse,
)
from zoo_swin.patches import merge_neighbours  # noqa: E402

import zoo  # noqa: E402
from zoo.errors import HFImportError, RecipeError  # noqa: E402
from zoo.testing import ComponentContract, RecipeContract  # noqa: E402

SWIN_TINY_PARAMETERS = 28_288_354
"""transformers' SwinForImageClassification(SwinConfig(num_labels=1000)) on the meta device."""

TINY = {
    "name": "swin-test",
    "architecture": "swin",
    "d_model": 8,
    "image_size": 16,
    "patch_size": 2,
    "num_classes": 3,
    "attention": {"type": "swin_window", "window_size": 3, "depths": [2, 1], "heads": [2, 4]},
}


class TestContract(ComponentContract):
    """zoo's component contract: forward and backward, compile, declared cost, config round trip."""

    plugin = "zoo-swin"


class TestRecipes(RecipeContract):
    recipes = ("swin-nano",)
    batch_size = 8

    def batch(self, recipe):
        g = torch.Generator().manual_seed(0)
        size = (self.batch_size, recipe.num_channels, recipe.image_size, recipe.image_size)
        labels = torch.randint(0, recipe.num_classes, (self.batch_size,), generator=g)
        return {"images": torch.randn(size, generator=g), "labels": labels}


def test_installed_plugin_registers_its_components_and_recipes():
    info = next(p for p in zoo.plugins.plugins() if p.name == "zoo-swin")
    assert (info.status, info.version, info.api) == ("ok", zoo_swin.__version__, zoo.PLUGIN_API_VERSION)
    assert info.registered["architecture"] == ["swin"] and info.registered["attention"] == ["swin_window"]
    assert sorted(info.registered["embedding"]) == ["swin_merge", "swin_patch"]
    assert sorted(info.recipes) == ["swin-nano", "swin-tiny"]
    model = zoo.build(TINY)
    assert model.zoo_components["stages.0.blocks.1.attention"].plugin == "zoo-swin"
    assert model.zoo_components["stages.0.merge"].name == "swin_merge"
    attention = model.stages[0].blocks[1].attention
    assert isinstance(attention, SwinWindowAttention) and (attention.num_heads, attention.shift) == (2, 1)
    assert model.stages[1].blocks[0].attention.num_heads == 4 and model.stages[1].blocks[0].attention.shift == 0


def test_save_and_load_round_trip_is_bit_identical(tmp_path):
    torch.manual_seed(0)
    model = zoo.build(TINY).eval()
    zoo.save(model, tmp_path / "swin")
    again = zoo.load(tmp_path / "swin").eval()
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(model(images).logits, again(images).logits)


def test_swin_tiny_has_exactly_transformers_parameter_count():
    model = zoo.build("swin-tiny", device="meta")
    assert sum(p.numel() for p in model.parameters()) == SWIN_TINY_PARAMETERS
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        hf = transformers.SwinForImageClassification(transformers.SwinConfig(num_labels=1000))
    assert sum(p.numel() for p in hf.parameters()) == SWIN_TINY_PARAMETERS


def test_declared_cost_of_swin_tiny_matches_its_modules():
    from zoo.analysis import analytic_parameters, compare_counts, parameter_breakdown

    model = zoo.build("swin-tiny", device="meta")
    assert analytic_parameters(model).total == SWIN_TINY_PARAMETERS
    assert compare_counts(parameter_breakdown(model), analytic_parameters(model)) == []


class TestWindows:
    def test_partition_and_reverse_are_transformers_and_inverse(self):
        swin = pytest.importorskip("transformers.models.swin.modeling_swin")
        x = torch.randn(2, 6, 9, 5)
        windows = window_partition(x, 3)
        assert torch.equal(windows, swin.window_partition(x, 3))
        assert torch.equal(window_reverse(windows, 3, 6, 9), x)

    @pytest.mark.parametrize(("height", "width", "window"), [(8, 8, 4), (12, 6, 3), (10, 10, 5), (14, 21, 7)])
    def test_shift_mask_equals_transformers(self, height, width, window):
        transformers = pytest.importorskip("transformers")
        from transformers.models.swin.modeling_swin import SwinLayer

        config = transformers.SwinConfig(embed_dim=8, window_size=window, num_heads=[2])
        layer = SwinLayer(config, dim=8, input_resolution=(height, width), num_heads=2, shift_size=window // 2)
        expected = layer.get_attn_mask(height, width, dtype=torch.float32, device="cpu")
        assert torch.equal(shift_mask(height, width, window, window // 2), expected)

    def test_relative_position_index_equals_transformers(self):
        pytest.importorskip("transformers")
        from transformers.models.swin.modeling_swin import SwinRelativePositionBias

        for window in (1, 2, 7):
            expected = SwinRelativePositionBias(2, (window, window)).relative_position_index
            assert torch.equal(relative_position_index(window), expected)

    def test_merge_takes_neighbours_in_transformers_order_and_pads_odd_grids(self):
        x = torch.arange(2 * 3 * 3, dtype=torch.float32).view(1, 9, 2)  # a 3x3 grid of 2-vectors
        merged, size = merge_neighbours(x, (3, 3))
        assert size == (2, 2) and merged.shape == (1, 4, 8)
        assert merged[0, 0].tolist() == [0, 1, 6, 7, 2, 3, 8, 9]  # (0,0), (1,0), (0,1), (1,1)
        assert merged[0, 3].tolist() == [16, 17, 0, 0, 0, 0, 0, 0]  # (2,2) and three zero pads

    @torch.no_grad()
    def test_a_shifted_block_keeps_each_window_apart_from_the_others(self):
        """Unshifted: a change in one window changes no output outside it."""
        torch.manual_seed(0)
        attention = SwinWindowAttention(8, window_size=2, depths=(2,), heads=(2,), layer_idx=0).eval()
        x = torch.randn(1, 16, 8)
        changed = x.clone()
        changed[0, 0] += 1.0  # grid position (0, 0): the top-left 2x2 window holds (0,0), (0,1), (1,0), (1,1)
        diff = (attention(x, size=(4, 4)) - attention(changed, size=(4, 4))).abs().sum(-1).view(4, 4)
        assert (diff[:2, :2] > 0).all() and (diff[2:] == 0).all() and (diff[:, 2:] == 0).all()


class TestRefusals:
    def test_a_window_larger_than_a_stage_grid_is_refused(self):
        with pytest.raises(RecipeError) as err:
            zoo.build({**TINY, "attention": {**TINY["attention"], "window_size": 5}})
        assert (
            "stage 2's patch grid is 4x4, smaller than the 5x5 window (its bias table would not fit, in transformers "
            "too): lower window_size or raise image_size" in str(err.value)
        )

    def test_heads_that_do_not_divide_a_stage_are_refused(self):
        with pytest.raises(RecipeError) as err:
            zoo.build({**TINY, "attention": {**TINY["attention"], "heads": [3, 4]}})
        assert "stage 1 is 8 wide (d_model * 2**0): 3 heads do not divide it" in str(err.value)

    def test_num_layers_must_be_the_stages_blocks(self):
        with pytest.raises(RecipeError) as err:
            zoo.build({**TINY, "num_layers": 4})
        assert "the stages hold sum(depths) = 3 blocks, but num_layers is 4" in str(err.value)

    def test_swin_window_belongs_to_swin_only(self):
        vit = {**zoo.get_registry().get("architecture", "vit").config.examples[0], "name": "vit"}
        vit["attention"] = {"type": "swin_window", "depths": [2], "heads": [4]}
        with pytest.raises(RecipeError) as err:
            zoo.build(vit)
        assert "swin_window attends within windows of an image's patch grid: it belongs to architecture 'swin'" in str(
            err.value
        )

    def test_another_attention_in_swin_is_refused(self):
        with pytest.raises(RecipeError) as err:
            zoo.build({**TINY, "attention": {"type": "mha", "num_heads": 2}})
        assert "architecture 'swin' takes attention swin_window, not mha" in str(err.value)


# ---------------------------------------------------------------------------------------------- Hugging Face

CASES = {
    "swin-tiny-hf": dict(
        image_size=32, patch_size=4, embed_dim=8, depths=[2, 1], num_heads=[2, 4], window_size=4, num_labels=3
    ),
    # a grid that is no multiple of the window (padded), odd grids merged, no qkv bias, other eps and activation
    "swin-padded-odd-nobias": dict(
        image_size=30,
        patch_size=3,
        embed_dim=12,
        depths=[2, 2, 1],
        num_heads=[3, 2, 4],
        window_size=3,
        num_labels=5,
        qkv_bias=False,
        layer_norm_eps=1e-6,
        hidden_act="gelu_new",
        num_channels=2,
    ),
}


def _hf_model(options: dict, folder) -> torch.nn.Module:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.SwinForImageClassification(transformers.SwinConfig(**options)).eval()
    with torch.no_grad():  # fresh tables and biases are zero: make every weight count
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(folder)
    return model


@pytest.mark.parametrize("case", list(CASES))
@torch.no_grad()
def test_import_equals_transformers(case, tmp_path):
    from zoo_swin.hf import from_swin_folder

    options = CASES[case]
    hf = _hf_model(options, tmp_path / "hf")
    model = from_swin_folder(tmp_path / "hf").eval()
    channels, side = options.get("num_channels", 3), options["image_size"]
    for size in ((side, side), (side + 2 * options["patch_size"], side + 5 * options["patch_size"] + 1)):
        images = torch.randn(3, channels, *size)  # the checkpoint's size, then another (padded, not square)
        expected = hf(pixel_values=images).logits
        assert (model(images).logits - expected).abs().max() <= 1e-4
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in hf.parameters())


@torch.no_grad()
def test_transformers_loads_the_export(tmp_path):
    transformers = pytest.importorskip("transformers")
    from zoo.hf import to_hf

    torch.manual_seed(0)
    model = zoo.build(TINY).eval()
    to_hf(model, tmp_path / "out")
    hf = transformers.SwinForImageClassification.from_pretrained(tmp_path / "out").eval()
    images = torch.randn(2, 3, 16, 16)
    assert (model(images).logits - hf(pixel_values=images).logits).abs().max() <= 1e-4


@torch.no_grad()
def test_zoo_hf_from_hf_imports_swin_as_transformers_computes_it(tmp_path):
    """zoo's own import reads a Swin folder (its per-stage num_heads checked item by item) through this plugin."""
    from zoo.hf import from_hf

    hf = _hf_model(CASES["swin-tiny-hf"], tmp_path / "hf")
    model = from_hf(tmp_path / "hf").eval()
    size = hf.config.image_size
    images = torch.randn(2, hf.config.num_channels, size, size)
    assert (model(images).logits - hf(pixel_values=images).logits).abs().max() <= 1e-4


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "use_absolute_embeddings",
            True,
            "use_absolute_embeddings=True is not supported: zoo's swin adds no absolute position table to the "
            "patches (only the windows' relative bias)",
        ),
        (
            "mlp_ratio",
            3.0,
            "mlp_ratio=3.0 is not supported: zoo's mlp is 4x its stage's width (or one fixed hidden width for all "
            "stages), so mlp_ratio is 4",
        ),
    ],
)
def test_options_zoo_cannot_reproduce_are_refused_by_name(tmp_path, option, value, message):
    from zoo_swin.hf import from_swin_folder

    _hf_model({**CASES["swin-tiny-hf"], option: value}, tmp_path / "hf")
    with pytest.raises(HFImportError) as err:
        from_swin_folder(tmp_path / "hf")
    assert message in str(err.value)


def test_every_config_attribute_is_read_checked_or_named():
    """As zoo's walk of its own families: a new SwinConfig option of a new transformers cannot pass unnoticed."""
    transformers = pytest.importorskip("transformers")
    from zoo_swin.hf import SWIN

    generic = set(transformers.PretrainedConfig().to_dict())
    names = {n for n in transformers.SwinConfig().to_dict() if n not in generic}
    checked = {option.key for option in SWIN.options}
    unaccounted = names - set(SWIN.defaults) - checked - set(SWIN.unread_keys)
    assert not unaccounted, f"swin: config attributes neither read, checked nor named: {sorted(unaccounted)}"
    stale = set(SWIN.unread) - set(transformers.SwinConfig().to_dict())
    assert not stale, f"swin: 'unread' names keys its config does not have: {sorted(stale)}"


def test_draw_labels_say_what_each_box_is():
    model = zoo.build("swin-tiny", device="meta")
    made = model.zoo_components["stages.2.blocks.3.attention"]
    label = made.config.label("attention", made.ctx, model.get_submodule("stages.2.blocks.3.attention"))
    assert label.lines == [
        "stage 3: 12 heads × 32",
        "7×7 windows, every second block shifted by 3",
        "relative bias 169 × 12",
    ]
    last = model.zoo_components["stages.3.blocks.1.attention"]  # a 7×7 grid within one 7×7 window: no shift
    assert last.config.label("attention", last.ctx, None).lines[1] == "7×7 windows, not shifted"
    merge = model.zoo_components["stages.0.merge"]
    assert merge.config.label("embedding", merge.ctx, None).lines == ["2×2 neighbours", "384 → 192"]
    patch = model.zoo_components["embedding"]
    assert patch.config.label("embedding", patch.ctx, None).lines == ["4×4 patches → 96", "LayerNorm"]
