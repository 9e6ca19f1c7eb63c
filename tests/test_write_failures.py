"""Write failures (a full disk, an I/O error) give one message and leave nothing half-written; what a killed
writer left is undone by the next write into the same folder."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import zoo
from zoo.cli import app


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def full_disk(*args, **kwargs):
    raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name.startswith(".") and "tmp" in p.name)


@pytest.mark.parametrize("failure", [full_disk, no_space], ids=["runtime-error", "enospc"])
def test_a_failed_build_leaves_no_folder_and_one_message(failure, tmp_path, monkeypatch):
    monkeypatch.setattr("zoo.checkpoint.save_model", failure)
    result = cli("build", "gpt-tiny", "-o", tmp_path / "m")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "model.safetensors" in lines[0] and ("could not be written" in lines[0] or "No space left" in lines[0])
    assert not (tmp_path / "m").exists() and leftovers(tmp_path) == []


def test_a_failed_export_leaves_no_partial_folder_that_looks_complete(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    assert transformers
    assert cli("build", "llama-tiny", "-o", tmp_path / "m").exit_code == 0
    monkeypatch.setattr("zoo.hf.io.save_file", full_disk)
    result = cli("export", tmp_path / "m", tmp_path / "hf")
    assert result.exit_code == 2 and "model.safetensors could not be written: RuntimeError" in result.stderr
    assert not (tmp_path / "hf").exists()  # not a config.json alone that looks like a checkpoint
    (tmp_path / "empty").mkdir()
    result = cli("export", tmp_path / "m", tmp_path / "empty")
    assert result.exit_code == 2 and list((tmp_path / "empty").iterdir()) == []


def test_what_a_killed_replacement_left_is_undone_by_the_next_write(tmp_path):
    out = tmp_path / "m"
    assert cli("build", "gpt-tiny", "-o", out).exit_code == 0
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # a process that has ended
    out.rename(tmp_path / f".m.replaced-{pid}")  # a killed --force: old folder aside, new one half-written
    out.mkdir()
    (out / "config.json").write_text("{")
    (out / ".model.safetensors.x1y2.tmp").write_bytes(b"partial")
    assert cli("build", "gpt-tiny", "-o", out).exit_code == 0  # the same model: recovered, then written again
    assert zoo.load_recipe(out).name == "gpt-tiny" and zoo.load(out) is not None
    assert not list(tmp_path.glob(".m.replaced-*")) and leftovers(tmp_path) == []


KILLABLE = """
import sys, time
import zoo.hf.io as io
real = io.save_file

def stalled(tensors, filename, metadata=None):
    real(tensors, filename, metadata=metadata)
    print("written", flush=True)
    time.sleep(120)  # killed here: the weights written to their temporary file, nothing renamed yet

io.save_file = stalled
from zoo.cli import main
sys.argv = ["zoo", *sys.argv[1:]]
main()
"""


def killed_export(script: Path, *args) -> None:
    proc = subprocess.Popen([sys.executable, str(script), *map(str, args)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "written"
    finally:
        proc.kill()
        proc.wait()


def test_an_export_killed_mid_write_is_cleaned_up_by_the_next(tmp_path):
    pytest.importorskip("transformers")
    script = tmp_path / "killable.py"
    script.write_text(KILLABLE)
    assert cli("build", "llama-tiny", "-o", tmp_path / "m").exit_code == 0
    killed_export(script, "export", tmp_path / "m", tmp_path / "hf")
    assert leftovers(tmp_path / "hf")  # what the kill left: a hidden temporary file
    assert cli("export", tmp_path / "m", tmp_path / "hf").exit_code == 0
    assert leftovers(tmp_path) == [] and (tmp_path / "hf" / "config.json").is_file()

    assert cli("build", "gpt-tiny", "-o", tmp_path / "other").exit_code == 0
    assert cli("export", tmp_path / "other", tmp_path / "gpt").exit_code == 0
    before = (tmp_path / "gpt" / "config.json").read_text()
    killed_export(script, "export", tmp_path / "m", tmp_path / "gpt", "--force")  # killed while replacing
    assert list(tmp_path.glob(".gpt.replaced-*"))
    refused = cli("export", tmp_path / "m", tmp_path / "gpt")  # the old export is back, so: another model
    assert refused.exit_code == 2 and "already holds another model" in refused.stderr
    assert (tmp_path / "gpt" / "config.json").read_text() == before and not list(tmp_path.glob(".gpt.replaced-*"))
