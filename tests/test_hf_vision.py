"""DINOv2, DINOv2 with registers and BEiT beyond the parity cases of tests/hf_cases: the bare models' features,
images of another size than the config's (the position table resized as transformers resizes it), and what zoo
cannot reproduce refused by name."""

from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo.errors import HFImportError
from zoo.hf import from_hf, hf_recipe

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

TINY = dict(image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=4)


def nudged(model: torch.nn.Module) -> torch.nn.Module:
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return model.eval()


def imported(hf: torch.nn.Module, tmp_path) -> torch.nn.Module:
    hf.save_pretrained(tmp_path)
    return from_hf(tmp_path).eval()


def images(height: int, width: int, channels: int = 3) -> torch.Tensor:
    return torch.randn(2, channels, height, width, generator=torch.Generator().manual_seed(3))


BARE = [
    (
        "BeitModel",
        "BeitConfig",
        {"use_mean_pooling": False, "use_relative_position_bias": True, "intermediate_size": 48},
    ),
    ("Dinov2Model", "Dinov2Config", {}),
    ("Dinov2Model", "Dinov2Config", {"use_swiglu_ffn": True, "layerscale_value": 0.1}),
    ("Dinov2WithRegistersModel", "Dinov2WithRegistersConfig", {"num_register_tokens": 2}),
]


@pytest.mark.parametrize("hf_class,config_class,options", BARE)
@torch.no_grad()
def test_a_bare_model_gives_transformers_features_and_pooled_vector(hf_class, config_class, options, tmp_path):
    config = getattr(transformers, config_class)(**TINY, **options)
    hf = nudged(getattr(transformers, hf_class)(config))
    model = imported(hf, tmp_path)
    assert model.recipe.head.type in ("embedding", "patch_mean")
    assert zoo.count_parameters(model) == sum(p.numel() for p in hf.parameters())
    x = images(16, 16)
    expected, actual = hf(pixel_values=x), model(x)
    assert (expected.last_hidden_state - actual.hidden_states).abs().max() < 1e-5
    assert (expected.pooler_output - actual.logits).abs().max() < 1e-5
    exported = tmp_path / "again"
    zoo.hf.to_hf(model, exported)
    assert json.loads((exported / "config.json").read_text())["architectures"] == [hf_class]


SIZES = [(24, 24), (8, 8), (16, 24), (20, 12)]  # larger, smaller and rectangular grids: the table resized


@pytest.mark.parametrize(
    "hf_class,config_class,options",
    [
        ("Dinov2ForImageClassification", "Dinov2Config", {"num_labels": 3}),
        ("Dinov2WithRegistersForImageClassification", "Dinov2WithRegistersConfig", {"num_register_tokens": 3}),
        ("Dinov2Model", "Dinov2Config", {}),
        ("BeitForImageClassification", "BeitConfig", {"use_absolute_position_embeddings": True, "num_labels": 3}),
    ],
)
@pytest.mark.parametrize("size", SIZES)
@torch.no_grad()
def test_images_of_another_size_resize_the_position_table_as_transformers(
    hf_class, config_class, options, size, tmp_path
):
    hf = nudged(getattr(transformers, hf_class)(getattr(transformers, config_class)(**TINY, **options)))
    model = imported(hf, tmp_path)
    x = images(*size)
    expected, actual = hf(pixel_values=x), model(x)
    if hf_class.endswith("Model"):  # the bare model: its features
        expected, actual = expected.last_hidden_state, actual.hidden_states
    else:
        expected, actual = expected.logits, actual.logits
    assert expected.shape == actual.shape
    assert (expected - actual).abs().max() < 1e-4


def test_the_native_size_reads_the_table_as_it_is():
    model = zoo.build("dinov2-tiny")
    table = model.embedding.position
    assert model.embedding.positions_for(4, 4) is table
    assert model.embedding.positions_for(6, 6).shape == (1, 1 + 36, 64)


@pytest.mark.parametrize(
    "config,refused",
    [
        ({"model_type": "dinov2", "image_size": [224, 112]}, "image_size=\\[224, 112\\]"),
        ({"model_type": "dinov2", "patch_size": [14, 7]}, "patch_size=\\[14, 7\\]"),
        ({"model_type": "dinov2", "hidden_act": "mish"}, "hidden_act='mish'"),
        ({"model_type": "dinov2", "architectures": ["Dinov2Backbone"]}, "Dinov2Backbone"),
        ({"model_type": "dinov2", "layerscale_value": 0.0}, "layerscale_value=0.0"),
        ({"model_type": "dinov2_with_registers", "image_size": [518, 224]}, "image_size=\\[518, 224\\]"),
        ({"model_type": "beit", "image_size": [224, 112]}, "image_size=\\[224, 112\\]"),
        ({"model_type": "beit", "hidden_act": "mish"}, "hidden_act='mish'"),
        (
            {"model_type": "beit", "use_relative_position_bias": True, "use_shared_relative_position_bias": True},
            "use_relative_position_bias=True with use_shared_relative_position_bias=True",
        ),
        ({"model_type": "beit", "architectures": ["BeitForMaskedImageModeling"]}, "BeitForMaskedImageModeling"),
        ({"model_type": "beit", "architectures": ["BeitForSemanticSegmentation"]}, "BeitForSemanticSegmentation"),
    ],
)
def test_what_zoo_cannot_reproduce_is_refused_by_name(config, refused, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFImportError, match=refused):
        hf_recipe(tmp_path)


def test_drop_path_is_training_only_and_imports():
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp())
    (folder / "config.json").write_text(json.dumps({"model_type": "dinov2", "drop_path_rate": 0.2, **TINY}))
    assert zoo.load_recipe(hf_recipe(folder)).block.layer_scale == 1.0


@pytest.mark.parametrize(
    "options,refused",
    [
        ({"attention.k_bias": True}, "needs all but k"),
        ({"head": {"type": "classification", "pool": "cls"}}, "needs {'type': 'classification', 'pool': 'patches'"),
    ],
)
def test_a_beit_recipe_beit_cannot_say_is_refused_on_export(options, refused, tmp_path):
    with pytest.raises(zoo.errors.HFExportError, match=refused):
        zoo.hf.to_hf(zoo.build("beit-tiny", **options), tmp_path)


def test_an_ffn_width_of_no_integer_ratio_is_refused_on_export(tmp_path):
    model = zoo.build("dinov2-tiny", ffn={"type": "mlp", "hidden": 100})
    with pytest.raises(zoo.errors.HFExportError, match="ffn.hidden 100 is d_model times no integer mlp_ratio"):
        zoo.hf.to_hf(model, tmp_path)


TINY_RECIPES = {"dinov2-tiny": "dinov2", "beit-tiny": "beit"}


@pytest.mark.parametrize("name", sorted(TINY_RECIPES))
def test_tiny_variant_trains_and_exports(tmp_path, name):
    """A few steps of ``zoo train`` on the digits: finite losses and an accuracy; the run exports as its family
    and transformers' Auto class gives the same logits."""
    import math

    from zoo.train import read_metrics, train

    settings = {
        "train.steps": 6,
        "train.checkpoint_interval": 6,
        "train.batch_size": 8,
        "train.warmup_steps": 2,
        "train.eval_interval": 0,
        "train.eval_batches": 1,
        "train.log_interval": 1,
    }
    result = train(name, out=tmp_path / "run", **settings)
    losses = [r["loss"] for r in read_metrics(tmp_path / "run") if r["split"] == "train"]
    assert len(losses) == 6 and all(math.isfinite(x) for x in losses)
    assert "accuracy" in result.eval
    zoo.hf.export_checkpoint(tmp_path / "run", tmp_path / "hf")
    model = zoo.load(tmp_path / "run").eval()
    hf = transformers.AutoModelForImageClassification.from_pretrained(tmp_path / "hf").eval()
    assert hf.config.model_type == TINY_RECIPES[name]
    x = images(8, 8, channels=1)
    with torch.no_grad():
        assert (hf(pixel_values=x).logits - model(x).logits).abs().max() < 1e-4
