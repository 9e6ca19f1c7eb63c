"""Tampered folders: links out of the folder, special files, oversized, deep or ambiguous JSON. Every reading
command refuses each with exit 2 and one message naming the file, never a traceback, and nothing from outside
the folder is read or copied."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zoo.cli import app

SECRET = "root:x:0:0:the secret outside the folder\n"


def cli(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> dict[str, Path]:
    """A tiny Hugging Face folder, its zoo import, and a two-step zoo run."""
    transformers = pytest.importorskip("transformers")
    import torch

    root = tmp_path_factory.mktemp("originals")
    small = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_attention_heads=2, num_hidden_layers=1)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(max_position_embeddings=32, **small)).save_pretrained(
        root / "hf"
    )
    assert (root / "hf" / "generation_config.json").is_file()
    assert cli("import", root / "hf", "--out", root / "model").exit_code == 0
    fast = ["--set", "train.steps=2", "--no-summary", "--device", "cpu"]
    assert cli("train", "gpt-tiny", "--out", root / "run", *fast).exit_code == 0
    return {"hf": root / "hf", "model": root / "model", "run": root / "run"}


def link_out(folder: Path, name: str) -> None:
    """Replace ``folder/name`` with a link to a file outside the folder (a secret, or a valid copy of it)."""
    outside = folder.parent / f"outside-{name.replace('/', '-')}"
    target = folder / name
    if name.endswith(".json") and name not in ("config.json",):
        outside.write_text(SECRET)
    else:
        shutil.copyfile(target, outside)  # complete and valid: only the confinement refuses it
    target.unlink()
    os.symlink(outside, target)


def make_fifo(folder: Path, name: str) -> None:
    (folder / name).unlink()
    os.mkfifo(folder / name)


def deep(folder: Path, name: str) -> None:
    data = json.loads((folder / name).read_text())
    data["nested"] = json.loads("[" * 100 + "]" * 100)
    (folder / name).write_text(json.dumps(data))


def twice(folder: Path, name: str) -> None:
    """The file's first key given a second time, with another value."""
    text = (folder / name).read_text()
    first = next(iter(json.loads(text)))
    (folder / name).write_text(text.rstrip().rstrip("}") + f', "{first}": "another"}}')


def huge(folder: Path, name: str) -> None:
    (folder / name).write_text((folder / name).read_text() + " " * 4096)


ATTACKS: dict[str, tuple[str, str, Callable[[Path, str], None], str]] = {
    # name: (which original, file, attack, what the message says)
    "hf-config-link": ("hf", "config.json", link_out, "is a link to"),
    "hf-generation-config-link": ("hf", "generation_config.json", link_out, "is a link to"),
    "hf-weights-link": ("hf", "model.safetensors", link_out, "is a link to"),
    "hf-config-fifo": ("hf", "config.json", make_fifo, "not a regular file"),
    "hf-weights-fifo": ("hf", "model.safetensors", make_fifo, "is a named pipe, not a regular file"),
    "hf-config-deep": ("hf", "config.json", deep, "nests deeper than 64 levels"),
    "hf-config-key-twice": ("hf", "config.json", twice, "appears twice in one object, so its value is ambiguous"),
    "hf-config-huge": ("hf", "config.json", huge, "zoo reads JSON files of at most 4,096 bytes"),
    "model-recipe-link": ("model", "recipe.yaml", link_out, "is a link to"),
    "model-weights-link": ("model", "model.safetensors", link_out, "is a link to"),
    "run-tokenizer-link": ("run", "checkpoints/step-00000002/tokenizer.json", link_out, "is a link to"),
    "run-weights-link": ("run", "checkpoints/step-00000002/model.safetensors", link_out, "is a link to"),
    "run-info-twice": ("run", "checkpoints/step-00000002/run.json", twice, "appears twice"),
}
ATTACKS_ON_EXPORT = {
    # what only an export reads: the files an import carried along
    "model-carried-tokenizer-link": ("model", "hf/generation_config.json", link_out, "is a link to"),
}

WEIGHT_READERS = {
    "hf": [
        ("import", "{folder}", "--out", "{tmp}/imported"),
        ("export", "{folder}", "{tmp}/exported"),
        ("generate", "{folder}", "--prompt", "The ", "--new", "2"),
    ],
    "model": [
        ("export", "{folder}", "{tmp}/exported"),
        ("eval", "{folder}", "--data", "{tmp}/text.txt"),
        ("train", "llama-tiny", "--init-from", "{folder}", "--out", "{tmp}/tuned", "--no-summary"),
    ],
    "run": [
        ("generate", "{folder}", "--prompt", "The ", "--new", "2"),
        ("export", "{folder}", "{tmp}/exported"),
        ("eval", "{folder}", "--data", "{tmp}/text.txt"),
        ("train", "gpt-tiny", "--init-from", "{folder}", "--out", "{tmp}/tuned", "--no-summary"),
    ],
}
RECIPE_READERS = [("summary", "{folder}"), ("diff", "{folder}", "gpt-tiny"), ("plan", "{folder}", "--gpu", "cpu")]
"""What reads a folder's recipe (or config.json) only, never its weights."""


@pytest.mark.parametrize("attack", sorted(ATTACKS) + sorted(ATTACKS_ON_EXPORT))
def test_every_reader_refuses_a_tampered_folder_with_one_message(attack, originals, tmp_path, monkeypatch):
    which, name, tamper, said = {**ATTACKS, **ATTACKS_ON_EXPORT}[attack]
    describes = name in ("recipe.yaml", "config.json")  # what every reader reads
    readers = WEIGHT_READERS[which] + (RECIPE_READERS if describes else [])
    if name.endswith("generation_config.json"):  # carried along by import and export; a model never reads it
        readers = [r for r in WEIGHT_READERS[which] if r[0] in ("import", "export")]
    (tmp_path / "text.txt").write_text("The cat sat on the mat. " * 20)
    folder = tmp_path / which
    shutil.copytree(originals[which], folder, symlinks=True)
    monkeypatch.setattr("zoo.files.MAX_JSON_BYTES", 4096)
    tamper(folder, name)
    for reader in readers:
        args = [a.format(folder=folder, tmp=tmp_path) for a in reader]
        result = cli(*args)
        assert result.exit_code == 2, (attack, args, result.output, result.exception)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), (attack, args, result.stderr)
        assert said in " ".join(result.stderr.split()) and "Traceback" not in result.stderr, (attack, result.stderr)
        for written in (tmp_path / "imported", tmp_path / "exported"):
            copies = [p for p in written.rglob("*") if p.is_file()] if written.exists() else []
            assert not any(SECRET in p.read_text(errors="replace") for p in copies), (attack, args)


def test_a_linked_step_folder_is_not_read_as_the_runs_latest(originals, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(originals["run"], run, symlinks=True)
    elsewhere = tmp_path / "elsewhere-step"
    shutil.copytree(run / "checkpoints" / "step-00000002", elsewhere)
    os.symlink(elsewhere, run / "checkpoints" / "step-00000009")
    result = cli("generate", run, "--prompt", "The ", "--new", "2")
    assert result.exit_code == 0, result.output
    assert "its latest complete checkpoint, step-00000002" in result.stderr


def test_a_link_inside_the_folder_is_read(originals, tmp_path):
    """Links are refused only when they leave the folder: one within it (a renamed file) reads as usual."""
    hf = tmp_path / "hf"
    shutil.copytree(originals["hf"], hf)
    (hf / "model.safetensors").rename(hf / "weights-v1.safetensors")
    os.symlink("weights-v1.safetensors", hf / "model.safetensors")
    assert cli("import", hf, "--out", tmp_path / "ok").exit_code == 0


def test_a_hub_cache_snapshot_reads_through_its_blobs(originals, tmp_path):
    """The Hugging Face cache keeps each file once in blobs/ and links snapshots to them: that is no escape."""
    repo = tmp_path / "models--org--tiny"
    snapshot = repo / "snapshots" / "0123abc"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for n, path in enumerate(sorted(originals["hf"].iterdir())):
        blob = repo / "blobs" / f"blob{n}"
        shutil.copyfile(path, blob)
        os.symlink(Path("..", "..", "blobs", blob.name), snapshot / path.name)
    result = cli("import", snapshot, "--out", tmp_path / "from-cache")
    assert result.exit_code == 0, result.output


def rewrite_weights(path: Path, change) -> None:
    from safetensors.torch import load_file, save_file

    state = load_file(path)
    save_file({n: change(n, t) for n, t in state.items()}, str(path), metadata={"format": "pt"})


def test_nan_and_fp8_weights_are_refused_by_name_on_every_reader(originals, tmp_path):
    import torch

    import zoo
    from zoo.errors import ZooError

    first = "model.embed_tokens.weight"
    nan_hf = tmp_path / "nan-hf"
    shutil.copytree(originals["hf"], nan_hf)
    rewrite_weights(nan_hf / "model.safetensors", lambda n, t: t.clone().fill_(float("nan")) if n == first else t)
    result = cli("import", nan_hf, "--out", tmp_path / "x")
    assert result.exit_code == 2 and "1 weights hold NaN or infinite values (e.g. model.embed_tokens.weight)" in (
        " ".join(result.stderr.split())
    )
    assert not (tmp_path / "x").exists()

    fp8 = tmp_path / "fp8-hf"
    shutil.copytree(originals["hf"], fp8)
    rewrite_weights(fp8 / "model.safetensors", lambda n, t: t.to(torch.float8_e4m3fn) if t.dim() == 2 else t)
    result = cli("import", fp8, "--out", tmp_path / "y")
    assert result.exit_code == 2 and "weights are float8_e4m3fn" in result.stderr
    assert "dequantize the checkpoint first" in " ".join(result.stderr.split())

    nan_model = tmp_path / "nan-model"
    shutil.copytree(originals["model"], nan_model)
    (nan_model / "checksums.json").unlink()  # as if written by a tool that records none
    rewrite_weights(
        nan_model / "model.safetensors",
        lambda n, t: t.clone().fill_(float("inf")) if n == "embedding.token.weight" else t,
    )
    with pytest.raises(ZooError, match=r"1 weights hold NaN or infinite values \(e.g. embedding.token.weight\)"):
        zoo.load(nan_model)
    result = cli("export", nan_model, tmp_path / "z")
    assert result.exit_code == 2 and "NaN or infinite" in result.stderr and not (tmp_path / "z").exists()
