"""``zoo import timm:NAME``: timm's VisionTransformer read as a zoo vit, logits equal to timm's forward; what zoo's
vit does not compute is refused by name. Skipped where timm is not installed (it needs torchvision)."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo.errors import HFImportError

timm = pytest.importorskip("timm")

from zoo.timm_import import convert, from_timm, import_timm, timm_model  # noqa: E402


@pytest.mark.parametrize("name", ["vit_tiny_patch16_224", "vit_small_patch32_224", "vit_base_patch32_clip_224"])
def test_imported_vits_give_timms_logits(name):
    torch.manual_seed(0)
    source, said = timm_model(name)
    assert said == "random weights (no pretrained weights in the cache)"
    with torch.no_grad():
        for p in source.parameters():  # off the init: zero biases and unit norms would hide a swapped tensor
            p.add_(0.02 * torch.randn_like(p))
    model = convert(source, name)
    images = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected, actual = source(images), model(images).logits
    assert zoo.count_parameters(model) == sum(p.numel() for p in source.parameters())
    assert (expected - actual).abs().max() < 1e-4


def test_a_timm_checkpoint_file_imports_with_its_weights(tmp_path):
    from safetensors.torch import save_file

    source, _ = timm_model("vit_tiny_patch16_224")
    with torch.no_grad():
        for p in source.parameters():
            p.add_(0.01 * torch.randn_like(p))
    save_file({k: v.contiguous() for k, v in source.state_dict().items()}, tmp_path / "w.safetensors")
    directory, parameters, said = import_timm(
        "timm:vit_tiny_patch16_224", tmp_path / "out", weights=tmp_path / "w.safetensors"
    )
    assert said == f"weights from {tmp_path / 'w.safetensors'}"
    model = zoo.load(directory).eval()
    images = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert (source(images) - model(images).logits).abs().max() < 1e-4
    assert parameters == zoo.count_parameters(model)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("deit3_small_patch16_224", "no_embed_class"),
        ("vit_medium_patch16_gap_256", "global_pool 'avg' is not supported"),
        ("vit_base_patch16_reg4_gap_256", "register tokens"),
        ("resnet18", "timm's ResNet is not supported: zoo imports timm's VisionTransformer"),
        ("vit_nonexistent_model", "timm has no model 'vit_nonexistent_model'"),
    ],
)
def test_what_zoo_cannot_compute_is_refused_by_name(name, message):
    with pytest.raises(HFImportError, match=message):
        from_timm(name)
