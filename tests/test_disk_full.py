"""A full disk, for real: a small tmpfs where this machine allows mounting one (skipped, saying why, where it
does not). Every write failure is one message, leaves no temporary file, and a run's latest checkpoint loads."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

import zoo
from zoo.cli import app


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of a given size in KiB, unmounted after the test."""
    mounted: list[Path] = []

    def mount(kib: int) -> Path:
        point = tmp_path / f"disk{len(mounted)}"
        point.mkdir()
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root; this machine runs the tests as another user")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(point)], capture_output=True)
        if done.returncode:
            pytest.skip(f"this machine does not allow mounting a tmpfs: {done.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in mounted:
        if subprocess.run(["umount", str(point)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(point)], check=False)  # never a mount left behind
            pytest.fail(f"{point} was still in use after the test: a file zoo opened there was left open")


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def hidden(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if p.name != ".zoo-train.lock")


def test_a_build_on_a_full_disk_is_one_message_and_leaves_nothing(small_disk):
    disk = small_disk(128)  # gpt-tiny's weights are 487 KiB
    result = cli("build", "gpt-tiny", "-o", disk / "m")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1
    assert "model.safetensors" in result.stderr
    assert not (disk / "m").exists() and hidden(disk) == []


def test_training_that_fills_the_disk_keeps_its_latest_checkpoint_loadable(small_disk):
    disk = small_disk(2500)  # one checkpoint of gpt-tiny (1.5 MiB) fits, a second does not
    run = disk / "run"
    settings = ["--set", "train.steps=6", "--set", "train.checkpoint_interval=1", "--set", "train.keep_checkpoints=5"]
    result = cli("train", "gpt-tiny", "--out", run, *settings, "--no-summary", "--device", "cpu")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())
    assert "could not be written: the disk is full;" in said and "zoo train --resume" in said
    assert "plugin" not in said  # zoo's own write, not blamed on a plugin that registered a zoo class
    assert hidden(run) == []  # no half-written checkpoint folder, no temporary file
    assert zoo.load(run) is not None
    assert (run / "checkpoints" / "step-00000001").is_dir()
