"""Sharded checkpoints (torch.distributed.checkpoint): a run of several processes writes each rank's shards, resumes
on another number of processes or strategy (one process included) at the same weights, and every reader sees the
checkpoint whole; a damaged shard is refused by its checksum, a killed write's temporary folder is cleaned."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import zoo
from zoo.errors import CheckpointError
from zoo.train import checkpoint as ckpt
from zoo.train import read_metrics, sharded, train

SETTINGS = {  # gpt-tiny has no dropout: the RNG streams (which differ with the world size) do not matter
    "train.steps": 20,
    "train.batch_size": 4,  # the global batch: 1 sequence per process on 4, 2 on 2
    "train.seq_len": 32,
    "train.lr": 3e-3,
    "train.warmup_steps": 2,
    "train.log_interval": 5,
    "train.eval_interval": 10,
    "train.eval_batches": 1,
    "train.checkpoint_interval": 10,
}

WORKER = """
import os, sys, torch
from zoo.train import train
out, parallel, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
if parallel.startswith("{{"):  # a mesh, as JSON
    import json
    parallel = json.loads(parallel)

def callback(event):  # rank 0 only: killed right after the checkpoint of step kill_at (all ranks wrote it)
    if event.kind == "checkpoint" and event.step == kill_at:
        os._exit(17)

resume = os.path.isdir(os.path.join(out, "checkpoints"))
extra = {{"train.parallel": parallel}}
result = train("gpt-tiny", out=out, device="cpu", resume=resume, allow_changes=resume, callback=callback,
               **{settings!r}, **extra)
# The weights the run ended with, as this rank holds them (the process group is gone: FSDP2's local shards).
state = result.model.state_dict()
held = {{k: (v.to_local(), True) if hasattr(v, "to_local") else (v, False) for k, v in state.items()}}
torch.save(held, os.path.join(out, "final-rank" + os.environ["RANK"] + ".pt"))
"""


def worker_env() -> dict[str, str]:
    """One thread per process, and the zoo this test imports (a worktree's, not another installed copy)."""
    source = str(Path(zoo.__file__).parents[1])
    path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}


def torchrun(tmp_path: Path, out: Path, processes: int, parallel: str, kill_at: int = -1) -> None:
    """Train (or resume) ``out`` on ``processes`` CPU processes; ``kill_at``: rank 0 exits right after that step's
    checkpoint (torchrun then stops the others)."""
    script = tmp_path / "sharded_worker.py"
    script.write_text(WORKER.format(settings=SETTINGS))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)]
    done = subprocess.run(
        [*cmd, str(script), str(out), parallel, str(kill_at)], env=worker_env(), capture_output=True, text=True
    )
    first_error = done.stderr.find("Traceback")
    shown = done.stderr[first_error : first_error + 4000] if first_error >= 0 else done.stderr[-4000:]
    if kill_at < 0:
        assert done.returncode == 0, shown
    else:
        assert done.returncode != 0 and "exitcode  : 17" in done.stderr, shown


def final_weights(run: Path) -> dict[str, torch.Tensor]:
    """The weights a torchrun run ended with: FSDP2's shards (dim 0, in rank order) put together, or rank 0's."""
    ranks = sorted(run.glob("final-rank*.pt"), key=lambda p: int(p.stem.removeprefix("final-rank")))
    held = [torch.load(p, weights_only=True) for p in ranks]
    return {k: torch.cat([h[k][0] for h in held]) if is_shard else t for k, (t, is_shard) in held[0].items()}


NOISE_DRIVEN = ".attention.k_proj.bias"
"""The key projection's bias has a zero gradient in exact arithmetic (softmax ignores a score added to every key), so
AdamW moves it by its normalized rounding noise, which depends on the summation order, that is on the number of
processes: after 10 steps on another mesh it differs by ~1e-6 (its values are ~1e-5); every other weight by <2e-7."""


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float = 1e-6) -> None:
    assert set(a) == set(b)
    for key in a:
        tolerance = max(atol, 1e-5) if key.endswith(NOISE_DRIVEN) and atol else atol
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=tolerance, msg=key)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """A run of 20 steps on 4 FSDP processes, never interrupted (checkpoints at steps 10 and 20)."""
    tmp = tmp_path_factory.mktemp("sharded")
    run = tmp / "fsdp4"
    torchrun(tmp, run, 4, "fsdp")
    return run


@pytest.mark.slow
@pytest.mark.parametrize(
    ("before", "after"),
    [((4, "fsdp"), (2, "fsdp")), ((2, "fsdp"), (4, "ddp")), ((4, '{"tensor": 2, "shard": 2}'), (2, "fsdp"))],
    ids=["fsdp4-to-fsdp2", "fsdp2-to-ddp4", "tp2xfsdp2-to-fsdp2"],
)
def test_a_killed_run_resumes_on_another_mesh_at_the_same_weights(tmp_path, reference, before, after):
    run = tmp_path / "run"
    torchrun(tmp_path, run, *before, kill_at=10)
    assert ckpt.latest_checkpoint(run).name == "step-00000010"
    assert not list(run.glob("final-rank*.pt"))
    info = ckpt.read_info(ckpt.latest_checkpoint(run))
    assert (info["world_size"], info["strategy"], info["format"]) == (before[0], "fsdp", sharded.FORMAT)
    torchrun(tmp_path, run, *after)
    assert ckpt.read_info(ckpt.latest_checkpoint(run))["step"] == 20
    assert [r["step"] for r in read_metrics(run) if r["split"] == "train"] == [5, 10, 15, 20]
    if isinstance(before[1], str) and before[1].startswith("{"):
        # Tensor parallelism sums its row-wise projections' partial outputs in another order than FSDP alone: by
        # step 10 the two runs differ by ~4e-6. Resuming on another mesh adds nothing to that: the weights at step
        # 20 are as far from the reference's as they were at step 10.
        def apart(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
            return max((a[k] - b[k]).abs().max().item() for k in a if not k.endswith(NOISE_DRIVEN))

        at_10 = [ckpt.read_model_state(r / "checkpoints" / "step-00000010") for r in (run, reference)]
        assert apart(final_weights(run), final_weights(reference)) <= apart(*at_10) + 1e-6
        return
    assert_same_weights(final_weights(run), final_weights(reference))


@pytest.mark.slow
def test_the_checkpoint_holds_each_ranks_shards_and_reads_whole(reference):
    checkpoint = ckpt.latest_checkpoint(reference)
    names = {p.name for p in checkpoint.iterdir()}
    assert {".metadata", "__0_0.distcp", "__3_0.distcp", "trainer.pt", "recipe.yaml", "run.json"} <= names
    assert not names & {"model.safetensors", "optimizer.pt"}
    info = ckpt.read_info(checkpoint)
    assert set(info["sha256"]) == names - {"run.json"}  # every shard and the index included
    assert info["mesh"] == {"world_size": 4, "replicate": 1, "shard": 4, "tensor": 1}
    assert info["aliases"] == {"head.proj.weight": "embedding.token.weight"}  # the tied head is stored once
    final = final_weights(reference)
    assert_same_weights(ckpt.read_model_state(checkpoint), final, atol=0)
    model = zoo.load(reference)  # every reader sees the checkpoint whole
    assert_same_weights(dict(model.state_dict()), final, atol=0)
    optimizer, trainer = ckpt.read_training_state(checkpoint)
    assert trainer["step"] == 20 and len(trainer["rng"]) == 4
    moments = optimizer["state"]["blocks.0.attention.q_proj.weight"]
    assert moments["exp_avg"].shape == final["blocks.0.attention.q_proj.weight"].shape
    whole = sharded.read_optimizer_state(checkpoint)
    assert set(whole["state"]) == set(optimizer["state"]) and whole["state"]


@pytest.mark.slow
def test_one_process_continues_a_sharded_run_and_cleans_a_killed_write(tmp_path, reference):
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    leftover = run / "checkpoints" / ".tmp-step-00000030-killed"  # what a write killed half-way leaves
    leftover.mkdir()
    (leftover / "__1_0.distcp").write_bytes(b"half a shard")
    events = []
    more = {**SETTINGS, "train.steps": 22, "train.parallel": "fsdp"}
    result = train("gpt-tiny", out=run, resume=True, allow_changes=True, device="cpu", callback=events.append, **more)
    assert not leftover.exists()
    assert any(e.kind == "notice" and ".tmp-step-00000030-killed" in str(e.data.get("removed")) for e in events)
    assert [e.step for e in events if e.kind == "resume"] == [20]
    assert result.step == 22
    written = ckpt.latest_checkpoint(run)  # one process writes the single-file format
    assert written.name == "step-00000022" and (written / "model.safetensors").is_file()


@pytest.mark.slow
def test_a_damaged_shard_is_refused_by_its_checksum(tmp_path, reference):
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    checkpoint = ckpt.latest_checkpoint(run)
    shard = checkpoint / "__2_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    message = r"__2_0.distcp does not match its checksum \(the sha256 recorded in run.json\)"
    with pytest.raises(CheckpointError, match=message):
        ckpt.read_model_state(checkpoint)
    with pytest.raises(CheckpointError, match=message):
        zoo.load(run)
    more = {**SETTINGS, "train.steps": 22, "train.parallel": "fsdp"}
    with pytest.raises(CheckpointError, match=message):
        train("gpt-tiny", out=run, resume=True, allow_changes=True, device="cpu", **more)
    shard.unlink()  # a recorded shard that is gone
    with pytest.raises(CheckpointError, match=r"__2_0.distcp is missing, though .*run.json records it"):
        ckpt.read_model_state(checkpoint)


class Planted:
    def __reduce__(self):
        return (os.mkdir, (str(Path.cwd() / "planted"),))


@pytest.mark.slow
def test_an_index_that_names_other_code_is_refused_unrun(tmp_path, reference, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    checkpoint = ckpt.latest_checkpoint(run)
    (checkpoint / ".metadata").write_bytes(pickle.dumps(Planted()))
    info = ckpt.read_info(checkpoint)  # a crafted folder: its checksums made to match
    info["sha256"][".metadata"] = hashlib.sha256((checkpoint / ".metadata").read_bytes()).hexdigest()
    (checkpoint / "run.json").write_text(json.dumps(info))
    message = r"\.metadata is refused: it names posix.mkdir, which no checkpoint index holds"
    with pytest.raises(CheckpointError, match=message):
        ckpt.read_model_state(checkpoint)
    more = {**SETTINGS, "train.steps": 22, "train.parallel": "fsdp"}
    with pytest.raises(CheckpointError, match=message):
        train("gpt-tiny", out=run, resume=True, allow_changes=True, device="cpu", **more)
    assert not (tmp_path / "planted").exists()


@pytest.mark.slow
def test_shards_with_nan_are_refused_on_resume(tmp_path, reference):
    import torch.distributed.checkpoint as dcp

    run = tmp_path / "run"
    shutil.copytree(reference, run)
    checkpoint = ckpt.latest_checkpoint(run)
    state = {"model": sharded.read_sharded(checkpoint, "model"), "optimizer": sharded.read_optimizer_state(checkpoint)}
    state["model"]["final_norm.weight"][3] = float("nan")
    for shard in [*checkpoint.glob("*.distcp"), checkpoint / ".metadata"]:
        shard.unlink()
    with warnings.catch_warnings():  # (that it writes without a process group, as asked)
        warnings.simplefilter("ignore")
        dcp.save(state, checkpoint_id=str(checkpoint), no_dist=True)  # as one process (another tool) would write it
    info = ckpt.read_info(checkpoint)
    info.pop("sha256")  # as an older zoo wrote it: no checksum to catch the change
    (checkpoint / "run.json").write_text(json.dumps(info))
    more = {**SETTINGS, "train.steps": 22, "train.parallel": "fsdp"}
    message = r"\.metadata: 1 weights hold nan or inf \(e.g. final_norm.weight\): the run had diverged"
    with pytest.raises(CheckpointError, match=message):
        train("gpt-tiny", out=run, resume=True, allow_changes=True, device="cpu", **more)


@pytest.mark.slow
def test_weights_that_became_non_finite_on_any_rank_are_never_saved(tmp_path):
    """Each rank checks its own shards; the verdict is every rank's (train.lr=1e38 breaks the weights at step 1)."""
    run = tmp_path / "run"
    script = tmp_path / "diverge.py"
    settings = {**SETTINGS, "train.lr": 1e38, "train.checkpoint_interval": 1, "train.parallel": "fsdp"}
    script.write_text(
        f"from zoo.train import train\ntrain('gpt-tiny', out={str(run)!r}, device='cpu', **{settings!r})\n"
    )
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    done = subprocess.run(cmd, env=worker_env(), capture_output=True, text=True)
    assert done.returncode != 0
    assert "weights became non-finite by step 1 (" in done.stderr and "none was written" in done.stderr
    assert ckpt.latest_checkpoint(run) is None


class Stop(Exception):
    pass


@pytest.mark.slow
def test_a_single_file_checkpoint_resumes_under_torchrun_at_the_same_weights(tmp_path, reference):
    run = tmp_path / "run"

    def stop_after_step_10(event):
        if event.kind == "checkpoint" and event.step == 10:
            raise Stop

    with pytest.raises(Stop):  # one process: the checkpoint of step 10 is model.safetensors + optimizer.pt
        train("gpt-tiny", out=run, device="cpu", callback=stop_after_step_10, **SETTINGS, **{"train.parallel": "fsdp"})
    assert (ckpt.latest_checkpoint(run) / "model.safetensors").is_file()
    torchrun(tmp_path, run, 4, "fsdp")
    latest = ckpt.latest_checkpoint(run)
    assert latest.name == "step-00000020" and sharded.is_sharded(latest)
    assert_same_weights(final_weights(run), final_weights(reference))
