"""``zoo import`` and ``zoo export --to hf`` driven through a runner: files written, weights unchanged."""

from __future__ import annotations

import pytest
import torch
import typer
from safetensors.torch import load_file
from typer.testing import CliRunner

import zoo
from zoo.cli.hf import register
from zoo.errors import HFExportError, HFImportError
from zoo.hf import to_hf


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_import_then_export_gives_back_the_same_checkpoint(app, tmp_path):
    torch.manual_seed(0)
    model = zoo.build("llama-tiny")
    to_hf(model, tmp_path / "hf")
    runner = CliRunner()

    result = runner.invoke(app, ["import", str(tmp_path / "hf"), "--out", str(tmp_path / "zoo")])
    assert result.exit_code == 0, result.output
    summary = f"Imported LlamaForCausalLM (llama, {zoo.count_parameters(model):,} parameters)"
    assert summary in " ".join(result.output.split())
    assert (tmp_path / "zoo" / "recipe.yaml").is_file()
    assert zoo.load(tmp_path / "zoo").recipe.positional.type == "rope"

    result = runner.invoke(app, ["export", str(tmp_path / "zoo"), "--to", "hf", str(tmp_path / "back")])
    assert result.exit_code == 0, result.output
    assert "Exported" in result.output
    before, after = load_file(tmp_path / "hf" / "model.safetensors"), load_file(tmp_path / "back" / "model.safetensors")
    assert list(before) == list(after)
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_errors_reach_the_apps_error_handler(app, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["import", str(tmp_path), "--out", str(tmp_path / "zoo")])
    assert isinstance(result.exception, HFImportError)
    pooled = {"extends": "gpt-tiny", "name": "pooled", "head": {"type": "classification"}, "num_classes": 3}
    zoo.save(zoo.build(pooled), tmp_path / "moe")  # fits no family, and has no remote-code class
    result = runner.invoke(app, ["export", str(tmp_path / "moe"), "--to", "hf", str(tmp_path / "out")])
    assert isinstance(result.exception, HFExportError)
    result = runner.invoke(app, ["export", str(tmp_path / "moe"), "--to", "onnx", str(tmp_path / "out")])
    assert result.exit_code == 2 and "onnx" in result.output


def test_timm_sources_say_what_they_need(app, tmp_path):
    import importlib.util

    runner = CliRunner()
    result = runner.invoke(app, ["import", str(tmp_path), "--weights", str(tmp_path / "w.safetensors")])
    assert isinstance(result.exception, zoo.errors.ArgumentError)
    assert "--weights is for timm:NAME; a Hugging Face folder holds its own weights" in str(result.exception)
    result = runner.invoke(app, ["import", "timm:vit_tiny_patch16_224", "--dtype", "bfloat16"])
    assert "--dtype casts a Hugging Face checkpoint; timm:NAME imports as timm builds it" in str(result.exception)
    if importlib.util.find_spec("timm") is None:  # where timm is installed, tests/test_timm.py imports for real
        result = runner.invoke(app, ["import", "timm:vit_tiny_patch16_224", "--out", str(tmp_path / "out")])
        assert isinstance(result.exception, HFImportError)
        assert "timm:NAME needs timm (No module named 'timm'): pip install timm" in str(result.exception)
        assert not (tmp_path / "out").exists()
