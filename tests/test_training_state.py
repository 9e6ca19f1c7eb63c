"""Tampered training state (checksums re-recorded, as an attacker or a buggy tool would): moments of another
shape, a negative step, cut-down parameter groups. Resuming refuses each by name before anything is loaded:
never a crash in the fused optimizer, never a run that trains from step -4."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from zoo.cli import app
from zoo.files import sha256_file
from zoo.train.checkpoint import OPTIMIZER_FILE, RUN_FILE, TRAINER_FILE

FAST = ["--set", "train.steps=2", "--set", "train.checkpoint_interval=2", "--no-summary", "--device", "cpu"]


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("state") / "run"
    assert cli("train", "gpt-tiny", "--out", out, *FAST).exit_code == 0
    return out


def tampered(run: Path, tmp_path: Path, name: str, change) -> Path:
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    step = copy / "checkpoints" / "step-00000002"
    data = torch.load(step / name, weights_only=False)
    change(data)
    torch.save(data, step / name)
    info = json.loads((step / RUN_FILE).read_text())
    info["sha256"][name] = sha256_file(step / name)  # re-recorded: only the content check can catch it
    (step / RUN_FILE).write_text(json.dumps(info))
    return copy


def small_moment(state):
    name = next(iter(state["state"]))
    state["state"][name]["exp_avg"] = torch.zeros(3)


def negative_step(trainer):
    trainer["step"] = -5


def cut_groups(state):
    state["param_groups"][0]["params"] = state["param_groups"][0]["params"][:1]


def moment_of_ints(state):
    name = next(iter(state["state"]))
    state["state"][name]["exp_avg_sq"] = torch.zeros_like(state["state"][name]["exp_avg_sq"], dtype=torch.int64)


@pytest.mark.parametrize(
    ("name", "change", "said"),
    [
        (OPTIMIZER_FILE, small_moment, "'s exp_avg has shape [3], the parameter"),
        (TRAINER_FILE, negative_step, "step must be an integer >= 0, found -5"),
        (OPTIMIZER_FILE, cut_groups, "its parameter groups hold [1, "),
        (OPTIMIZER_FILE, moment_of_ints, "'s exp_avg_sq must be a floating-point tensor"),
    ],
    ids=["moment-shape", "negative-step", "cut-groups", "integer-moment"],
)
def test_resume_refuses_training_state_that_does_not_fit(run, tmp_path, name, change, said):
    copy = tampered(run, tmp_path, name, change)
    more = ["--set", "train.steps=4", "--allow-changes"]
    result = cli("train", "gpt-tiny", "--out", copy, "--resume", *FAST, *more)
    assert result.exit_code == 2, (result.output, result.exception)
    assert said in " ".join(result.stderr.split()) and "Traceback" not in result.stderr
    assert not list((copy / "checkpoints").glob("step--*")) and not (copy / "checkpoints" / "step-00000003").exists()
