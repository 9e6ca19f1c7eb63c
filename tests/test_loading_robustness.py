"""Loading what zoo (or someone else) wrote: every damaged, swapped or hostile file is a clear ``ZooError``
naming the file and what is wrong, never a traceback; weights carry a checksum."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from clean_errors import FAST as TINY_RUN
from clean_errors import assert_clean_error, cli
from safetensors.torch import load_file, save_file

import zoo
import zoo.files
from zoo.errors import CheckpointError, HFImportError, ZooError
from zoo.train import checkpoint as ckpt
from zoo.train import load_run, train

FAST = {
    **TINY_RUN,
    "train.checkpoint_interval": 2,
}
SETS = [a for k, v in FAST.items() for a in ("--set", f"{k}={v}")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("trained") / "run"
    train("gpt-tiny", out=run, device="cpu", **FAST)
    return run


@pytest.fixture
def run(trained, tmp_path) -> Path:
    """A fresh copy of the trained run, to damage."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def checkpoint_of(run: Path) -> Path:
    return run / "checkpoints" / "step-00000002"


def without_checksums(checkpoint: Path) -> None:
    """Make the checkpoint look like one written before checksums existed."""
    info = json.loads((checkpoint / "run.json").read_text())
    info.pop("sha256")
    (checkpoint / "run.json").write_text(json.dumps(info))


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))


def swap_recipe(path: Path) -> None:
    recipe = yaml.safe_load(path.read_text())
    recipe["d_model"], recipe["attention"]["num_heads"] = 32, 4
    path.write_text(yaml.safe_dump(recipe))


# ---------------------------------------------------------------------------------------------- a training run


WEIGHTS_DAMAGE = {
    "truncated": (truncate, "is not a readable safetensors file: Error while deserializing header"),
    "empty": (lambda p: p.write_bytes(b""), "is not a readable safetensors file: it is empty (0 bytes)"),
    "pickled": (
        lambda p: torch.save({"w": torch.zeros(2)}, p),
        "is not a readable safetensors file: it is a zip archive (a torch.save file?)",
    ),
    "flipped": (flip_a_byte, "model.safetensors does not match its checksum (the sha256 recorded in run.json): "),
}


@pytest.mark.parametrize("damage", list(WEIGHTS_DAMAGE))
def test_damaged_weights_are_named_by_load_run_generate_and_resume(run, damage):
    mutate, message = WEIGHTS_DAMAGE[damage]
    weights = checkpoint_of(run) / "model.safetensors"
    mutate(weights)
    with pytest.raises(CheckpointError) as info:
        load_run(run)
    assert str(weights) in str(info.value) and message in str(info.value)
    assert_clean_error(cli("generate", str(run), "--prompt", "The ", "--max-new-tokens", "2"), str(weights), message)
    assert_clean_error(
        cli("train", "gpt-tiny", "--out", str(run), "--resume", "--no-summary", "--device", "cpu", *SETS),
        str(weights),
        message,
    )


def test_flipped_bytes_are_caught_and_the_message_says_what_it_means(run):
    flip_a_byte(checkpoint_of(run) / "model.safetensors")
    with pytest.raises(CheckpointError, match="does not match its checksum .*: flipped bytes or a swapped file"):
        load_run(run)
    with pytest.raises(CheckpointError, match="does not match its checksum"):
        zoo.load(checkpoint_of(run))  # a checkpoint is a zoo.save folder too: run.json holds the checksum


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{oops", "run.json is not valid JSON"),
        ("[1, 2]", "run.json must hold a JSON object, not a list"),
        ('{"aliases": {}}', "run.json has no valid step (found None)"),
        ('{"step": "two"}', "run.json has no valid step (found 'two')"),
    ],
    ids=["invalid-json", "not-an-object", "no-step", "bad-step"],
)
def test_a_bad_run_json_is_named(run, content, message):
    (checkpoint_of(run) / "run.json").write_text(content)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_run(run)
    assert_clean_error(cli("generate", str(run), "--prompt", "x", "--max-new-tokens", "2"), "run.json", message)


def test_a_truncated_optimizer_state_is_named_on_resume(run):
    optimizer = checkpoint_of(run) / "optimizer.pt"
    truncate(optimizer)
    with pytest.raises(CheckpointError, match="optimizer.pt does not match its checksum"):
        train("gpt-tiny", out=run, device="cpu", resume=True, **FAST)
    without_checksums(checkpoint_of(run))  # an older checkpoint: the file itself is read, and refused
    with pytest.raises(CheckpointError, match=r"optimizer.pt cannot be read as a torch file .*truncated or damaged"):
        train("gpt-tiny", out=run, device="cpu", resume=True, **FAST)
    assert_clean_error(
        cli("train", "gpt-tiny", "--out", str(run), "--resume", "--no-summary", "--device", "cpu", *SETS),
        str(optimizer),
        "truncated or damaged",
    )


def test_a_torch_file_holding_code_is_refused_on_resume(run, tmp_path):
    trainer_file = checkpoint_of(run) / "trainer.pt"
    payload = Payload(tmp_path / "payload-ran")
    torch.save({"step": 2, "scheduler": {}, "rng": [], "payload": payload}, trainer_file)
    without_checksums(checkpoint_of(run))
    with pytest.raises(CheckpointError, match=r"trainer.pt is refused: it holds Python objects other than tensors"):
        train("gpt-tiny", out=run, device="cpu", resume=True, **FAST)
    assert not payload.marker.exists()


def test_a_recipe_swapped_for_another_models_is_named(run):
    recipe = checkpoint_of(run) / "recipe.yaml"
    swap_recipe(recipe)
    with pytest.raises(CheckpointError, match="recipe.yaml does not match its checksum"):
        load_run(run)
    without_checksums(checkpoint_of(run))
    with pytest.raises(CheckpointError) as info:
        load_run(run)
    message = str(info.value)
    assert f"{checkpoint_of(run) / 'model.safetensors'} does not fit the model of {recipe}" in message
    assert "blocks.0.attention.q_proj.weight: shape (64, 64) in the file, (32, 32) in the model" in message
    assert "... and 27 more" in message  # every mis-shaped tensor counted, the first few named
    assert_clean_error(cli("generate", str(run), "--prompt", "x", "--max-new-tokens", "2"), "does not fit the model")


def test_a_damaged_tokenizer_is_named(run):
    (checkpoint_of(run) / "tokenizer.json").write_text('{"type": "bpe", "tokenizer": 5}')
    without_checksums(checkpoint_of(run))
    with pytest.raises(CheckpointError, match="tokenizer.json does not describe a tokenizer"):
        load_run(run)


def test_a_damaged_latest_pointer_falls_back_to_the_newest_complete_checkpoint(run):
    (run / "checkpoints" / "latest").write_bytes(b"\xff\xfe../../../etc")
    assert ckpt.latest_checkpoint(run) == checkpoint_of(run)


def test_every_checkpoint_file_has_a_checksum_in_run_json(run):
    sums = ckpt.read_info(checkpoint_of(run))["sha256"]
    assert set(sums) == {"model.safetensors", "recipe.yaml", "optimizer.pt", "trainer.pt", "tokenizer.json"}
    assert sums["model.safetensors"] == zoo.files.sha256_file(checkpoint_of(run) / "model.safetensors")


# ---------------------------------------------------------------------------------------------- zoo.save folders


@pytest.fixture
def saved(tmp_path) -> Path:
    torch.manual_seed(0)
    return zoo.save(zoo.build("gpt-tiny"), tmp_path / "model")


def test_a_saved_model_records_and_checks_its_checksum(saved):
    record = json.loads((saved / "checksums.json").read_text())
    assert record == {"sha256": {"model.safetensors": zoo.files.sha256_file(saved / "model.safetensors")}}
    flip_a_byte(saved / "model.safetensors")
    with pytest.raises(CheckpointError) as info:
        zoo.load(saved)
    assert str(info.value) == (
        f"{saved / 'model.safetensors'}: model.safetensors does not match its checksum (the sha256 recorded in "
        "checksums.json): flipped bytes or a swapped file"
    )
    assert_clean_error(cli("export", str(saved), "--to", "hf", str(saved.parent / "hf")), "does not match its checksum")


def test_a_model_saved_before_checksums_still_loads(saved):
    (saved / "checksums.json").unlink(missing_ok=True)
    loaded = zoo.load(saved)
    expected = load_file(saved / "model.safetensors")
    assert torch.equal(loaded.state_dict()["embedding.token.weight"], expected["embedding.token.weight"])


@pytest.mark.parametrize("damage", ["truncated", "empty", "pickled"])
def test_a_damaged_saved_model_is_named(saved, damage):
    mutate, message = WEIGHTS_DAMAGE[damage]
    mutate(saved / "model.safetensors")
    with pytest.raises(CheckpointError, match=re.escape(message)):
        zoo.load(saved)


def test_a_saved_model_with_another_models_recipe_is_named(saved):
    swap_recipe(saved / "recipe.yaml")
    with pytest.raises(CheckpointError, match=r"does not fit the model of .*recipe.yaml(.|\n)*shape \(64, 64\) in the"):
        zoo.load(saved)
    assert_clean_error(cli("export", str(saved), "--to", "hf", str(saved.parent / "hf")), "does not fit the model")


def test_weights_missing_a_tensor_are_named(saved):
    state = load_file(saved / "model.safetensors")
    del state["final_norm.weight"]
    save_file(state, saved / "model.safetensors")
    (saved / "checksums.json").unlink()
    with pytest.raises(CheckpointError, match="missing from the file: final_norm.weight"):
        zoo.load(saved)


# ---------------------------------------------------------------------------------------------- Hugging Face


class Payload:
    """A pickle that would run a command when loaded without ``weights_only``: it creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def hf(tmp_path) -> Path:
    torch.manual_seed(0)
    return zoo.to_hf(zoo.build("gpt-tiny"), tmp_path / "hf")


def test_a_malicious_pickle_is_refused_with_a_clear_error(hf, tmp_path):
    (hf / "model.safetensors").unlink()
    payload = Payload(tmp_path / "payload-ran")  # this test's own file: a parallel run cannot create it
    torch.save({"transformer.wte.weight": payload}, hf / "pytorch_model.bin")
    with pytest.raises(HFImportError) as info:
        zoo.from_hf(hf)
    assert f"{hf / 'pytorch_model.bin'} is refused: it holds Python objects other than tensors" in str(info.value)
    assert "could run code" in str(info.value)
    assert not payload.marker.exists()
    assert_clean_error(cli("import", str(hf), "--out", str(tmp_path / "z")), "is refused", "could run code")


def test_a_truncated_bin_file_is_named(hf, tmp_path):
    state = load_file(hf / "model.safetensors")
    (hf / "model.safetensors").unlink()
    torch.save(state, hf / "pytorch_model.bin")
    truncate(hf / "pytorch_model.bin")
    assert_clean_error(
        cli("import", str(hf), "--out", str(tmp_path / "z")), "pytorch_model.bin cannot be read", "truncated"
    )


def test_a_truncated_hf_safetensors_file_is_named(hf, tmp_path):
    truncate(hf / "model.safetensors")
    with pytest.raises(HFImportError, match="model.safetensors is not a readable safetensors file"):
        zoo.from_hf(hf)


def test_shard_paths_are_confined_to_the_model_folder(hf, tmp_path):
    # The weights sit outside the folder, complete and valid: only the confinement refuses them.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(hf / "model.safetensors", outside / "model.safetensors")
    names = list(load_file(outside / "model.safetensors"))
    index = {"weight_map": {n: "../elsewhere/model.safetensors" for n in names}}
    (hf / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(HFImportError, match=r"lists the shard '../elsewhere/model.safetensors', which is outside"):
        zoo.from_hf(hf)
    index = {"weight_map": {n: "../../../../etc/passwd" for n in names}}
    (hf / "model.safetensors.index.json").write_text(json.dumps(index))
    assert_clean_error(
        cli("import", str(hf), "--out", str(tmp_path / "z")), "'../../../../etc/passwd', which is outside", "refused"
    )
    index = {"weight_map": {n: str(outside / "model.safetensors") for n in names}}  # absolute: outside too
    (hf / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(HFImportError, match="which is outside"):
        zoo.from_hf(hf)


def test_a_damaged_shard_index_is_named(hf, tmp_path):
    (hf / "model.safetensors").unlink()
    (hf / "model.safetensors.index.json").write_text("{not json")
    with pytest.raises(ZooError, match="model.safetensors.index.json is not valid JSON"):
        zoo.from_hf(hf)
    (hf / "model.safetensors.index.json").write_text('{"weight_map": ["a"]}')
    with pytest.raises(HFImportError, match="'weight_map' must map tensor names to shard file names"):
        zoo.from_hf(hf)


def test_a_saved_model_whose_weights_are_gone_is_not_a_random_model(saved):
    (saved / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model.safetensors is missing, though .*checksums.json records it"):
        zoo.load(saved)


def test_a_damaged_metrics_file_skips_its_damaged_lines(run):
    from zoo.train import read_metrics

    with (run / "metrics.jsonl").open("ab") as f:
        f.write(b'\xff\xfe\x00garbage\n5\n["a"]\n{"split": "train", "step": 3, "loss": 1.0}\n')
    assert [r["step"] for r in read_metrics(run) if r["split"] == "train"] == [1, 2, 3]


def test_a_valid_file_whose_header_length_starts_with_0x80_is_not_taken_for_a_pickle(tmp_path):
    from safetensors.torch import save_file

    from zoo.files import safetensors_header

    # The 8-byte little-endian header length comes first; find a tensor name that makes it end in 0x80.
    for n in range(1, 200):
        path = tmp_path / f"w{n}.safetensors"
        save_file({"x" * n: torch.zeros(2)}, str(path))
        if path.read_bytes()[:1] == b"\x80":
            break
    else:
        pytest.fail("no header length starting with 0x80 was produced")
    assert safetensors_header(path) == {"x" * n: ("F32", (2,))}
