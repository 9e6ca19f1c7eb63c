"""Several processes: the same recipe under torchrun (gloo, 2 CPU processes) trains like one process with the
same global batch; DDP replicas stay identical; FSDP2 shards train the same model; checkpoints move between
world sizes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zoo.train import checkpoint as ckpt
from zoo.train import read_metrics, train

SETTINGS = {
    "train.steps": 6,
    "train.batch_size": 4,  # both processes together: 2 sequences each
    "train.seq_len": 32,
    "train.lr": 3e-3,
    "train.warmup_steps": 2,
    "train.log_interval": 1,
    "train.eval_interval": 3,
    "train.eval_batches": 2,
    "train.checkpoint_interval": 3,
}

WORKER = """
import os, sys, torch
from zoo.train import train
out, name, parallel = sys.argv[1], sys.argv[2], sys.argv[3]
result = train(name, out=out, device="cpu", **{settings!r}, **{{"train.parallel": parallel}})
if parallel == "ddp":  # each replica's own weights, to compare them
    torch.save(result.model.state_dict(), os.path.join(out, f"rank{{os.environ['RANK']}}.pt"))
"""


def torchrun(tmp_path: Path, name: str, parallel: str) -> Path:
    out = tmp_path / f"{name}-{parallel}"
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(settings=SETTINGS))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*cmd, str(script), str(out), name, parallel], env=env, capture_output=True, text=True)
    first_error = done.stderr.find("Traceback")
    assert done.returncode == 0, done.stderr[first_error : first_error + 4000] if first_error >= 0 else done.stderr
    return out


def records(run: Path, split: str) -> list[dict]:
    return [r for r in read_metrics(run) if r["split"] == split]


def assert_same_training(run: Path, reference: Path, rel: float = 1e-4) -> None:
    a, b = records(run, "train"), records(reference, "train")
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 7))
    for x, y in zip(a, b, strict=True):  # the same global batch, split over two processes: equal up to summation order
        assert x["loss"] == pytest.approx(y["loss"], rel=rel), x["step"]
    for x, y in zip(records(run, "eval"), records(reference, "eval"), strict=True):
        assert x["loss"] == pytest.approx(y["loss"], rel=rel)


# The load-balancing loss of a mixture of experts is a product of two batch means (Switch Transformer), so
# each process computing it on its half of the batch adds up to a slightly different value than one process
# computing it on the whole batch (standard data-parallel MoE behaviour): a looser tolerance, 1e-3.
TOLERANCE = {"gpt-tiny": 1e-4, "moe-tiny": 1e-3}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt-tiny", "moe-tiny"])
def test_ddp_on_two_processes_matches_one_process(tmp_path, name):
    run = torchrun(tmp_path, name, "ddp")
    single = train(name, out=tmp_path / "single", device="cpu", **SETTINGS)
    assert_same_training(run, tmp_path / "single", TOLERANCE[name])
    info = ckpt.read_info(ckpt.latest_checkpoint(run))
    assert (info["world_size"], info["strategy"]) == (2, "ddp")
    replicas = [torch.load(run / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    for key, tensor in replicas[0].items():  # the replicas never drift apart
        assert torch.equal(tensor, replicas[1][key]), key
        if name != "moe-tiny":  # (MoE: the different balancing loss moves router weights measurably)
            torch.testing.assert_close(tensor, single.model.state_dict()[key], rtol=1e-3, atol=1e-5)
    # A checkpoint written by two processes resumes in one.
    more = {**SETTINGS, "train.steps": 8}  # and parallel: auto (one process) instead of ddp: changes to allow
    resumed = train(name, out=run, resume=True, allow_changes=True, device="cpu", **more)
    assert resumed.step == 8 and [r["step"] for r in records(run, "train")] == list(range(1, 9))


@pytest.mark.slow
def test_fsdp2_on_two_processes_matches_one_process(tmp_path):
    run = torchrun(tmp_path, "gpt-tiny", "fsdp")
    train("gpt-tiny", out=tmp_path / "single", device="cpu", **SETTINGS)
    assert_same_training(run, tmp_path / "single")
    assert ckpt.read_info(ckpt.latest_checkpoint(run))["strategy"] == "fsdp"
    full = ckpt.read_model_state(ckpt.latest_checkpoint(run))  # gathered whole from the shards
    single = ckpt.read_model_state(ckpt.latest_checkpoint(tmp_path / "single"))
    for key, tensor in single.items():
        torch.testing.assert_close(full[key], tensor, rtol=1e-3, atol=1e-5)


def test_global_batch_must_split_evenly(tmp_path, monkeypatch):
    from zoo.errors import TrainError
    from zoo.train import distributed

    monkeypatch.setattr(distributed, "setup", lambda device: distributed.Distributed(rank=0, world_size=3))
    with pytest.raises(TrainError, match=r"batch_size \(4\) is the batch of all 3 processes"):
        train("gpt-tiny", out=tmp_path / "run", **SETTINGS)
