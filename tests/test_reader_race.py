"""A reader that meets a checkpoint being pruned by the trainer reads the newest complete one again, once: never
a FileNotFoundError, never a run without its tokenizer ('trained on images')."""

from __future__ import annotations

import shutil

import pytest
from typer.testing import CliRunner

import zoo
import zoo.checkpoint
import zoo.train.checkpoint as ckpt
import zoo.train.run
from zoo.cli import app

SETTINGS = ["--set", "train.steps=4", "--set", "train.checkpoint_interval=2", "--no-summary", "--device", "cpu"]


@pytest.fixture
def run(tmp_path):
    out = tmp_path / "run"
    assert CliRunner().invoke(app, ["train", "gpt-tiny", "--out", str(out), *SETTINGS]).exit_code == 0
    assert (out / "checkpoints" / "step-00000002").is_dir() and (out / "checkpoints" / "step-00000004").is_dir()
    (out / "checkpoints" / "latest").unlink(missing_ok=True)  # the newest complete folder is found by name
    return out


def pruned_while_read(monkeypatch, module, name):
    """Patch ``module.name`` so that its first call finds its checkpoint removed under it (as the trainer's
    pruning would) and fails as the real read then fails."""
    real = getattr(module, name)
    calls = []

    def racing(path, *args, **kwargs):
        if not calls:
            folder = path if path.is_dir() else path.parent
            calls.append(folder)
            shutil.rmtree(folder)
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(module, name, racing)
    return calls


def test_load_run_reads_the_newest_again_when_its_checkpoint_is_pruned(run, monkeypatch):
    calls = pruned_while_read(monkeypatch, ckpt, "read_model_state")
    loaded = zoo.train.run.load_run(run)
    assert calls and calls[0].name == "step-00000004"
    assert loaded.checkpoint.name == "step-00000002" and loaded.tokenizer is not None


def test_zoo_load_reads_the_newest_again_when_its_checkpoint_is_pruned(run, monkeypatch):
    calls = pruned_while_read(monkeypatch, zoo.checkpoint, "safetensors_header")
    model = zoo.load(run)
    assert calls and calls[0].name == "step-00000004" and model.recipe.name == "gpt-tiny"


def test_a_checkpoint_that_vanishes_after_its_weights_are_read_is_not_a_run_without_tokenizer(run, monkeypatch):
    real = ckpt.read_tokenizer
    seen = []

    def vanishing(checkpoint):
        if not seen:
            seen.append(checkpoint)
            shutil.rmtree(checkpoint)
            return None  # what the read finds: no tokenizer file any more
        return real(checkpoint)

    monkeypatch.setattr(ckpt, "read_tokenizer", vanishing)
    loaded = zoo.train.run.load_run(run)
    assert seen and loaded.tokenizer is not None and loaded.checkpoint.name == "step-00000002"
