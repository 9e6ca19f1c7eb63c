"""Several processes: the same recipe under torchrun (gloo, 2 CPU processes) trains like one process with the
same global batch; DDP replicas stay identical; FSDP2 shards train the same model; checkpoints move between
world sizes; two torchrun agents ("nodes") on this machine form one world through a c10d rendezvous."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
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


# The load-balancing loss of a mixture of experts is a product of two batch means (Switch Transformer); the
# processes count the experts' shares over the whole batch (``balance_group``), so it is one process's loss too.
TOLERANCE = {"gpt-tiny": 1e-4, "moe-tiny": 1e-4}


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


NODE_WORKER = """
import json, os, sys
from zoo.train import train
out, parallel = sys.argv[1], sys.argv[2]
hsdp = {{"train.parallel": "fsdp", "train.fsdp_sharding": "hybrid"}}
extra = hsdp if parallel == "hsdp" else {{"train.parallel": "ddp"}}
result = train("gpt-tiny", out=out, device="cpu", **{settings!r}, **extra)
seen = {{k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")}}
mesh = getattr(next(result.model.parameters()), "device_mesh", None)  # FSDP2's parameters are DTensors
if mesh is not None:
    seen.update(mesh_names=list(mesh.mesh_dim_names), mesh_ranks=mesh.mesh.tolist())
with open(os.path.join(out, "rank" + seen["RANK"] + ".json"), "w") as f:
    json.dump(seen, f)
"""
NODE_TIMEOUT = 180.0
"""Seconds both agents get together before they are killed (a failed rendezvous must not hang the suite)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(agent: subprocess.Popen) -> None:
    """End a torchrun agent that is still running: SIGTERM, which it passes on to its workers (each in a session
    of its own), then SIGKILL to the agent's session if it has not ended within 15 s."""
    if agent.poll() is not None:
        return
    os.killpg(agent.pid, signal.SIGTERM)
    try:
        agent.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait()


def two_node_torchrun(tmp_path: Path, parallel: str) -> Path:
    """Two torchrun agents, two processes each, joined by a c10d rendezvous on 127.0.0.1: one world of 4."""
    out = tmp_path / f"nodes-{parallel}"
    out.mkdir()
    script = tmp_path / "node_worker.py"
    script.write_text(NODE_WORKER.format(settings=SETTINGS))
    rdzv = ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", uuid.uuid4().hex]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2", *rdzv]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    logs = [tmp_path / f"agent{i}.log" for i in (0, 1)]
    agents = []
    for log in logs:
        with log.open("w") as f:  # a file, not a pipe: a full pipe would stall a chatty agent
            command = [*cmd, str(script), str(out), parallel]
            agents.append(
                subprocess.Popen(command, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
            )
    deadline, codes = time.monotonic() + NODE_TIMEOUT, [None, None]
    try:  # until both finish, one fails (its peer would wait for it in vain) or the time is up
        while time.monotonic() < deadline:
            codes = [agent.poll() for agent in agents]
            if None not in codes or any(code for code in codes if code is not None):
                break
            time.sleep(0.2)
    finally:
        for agent in agents:
            stop(agent)
    output = "\n".join(f"--- agent {i} ---\n{log.read_text()[-4000:]}" for i, log in enumerate(logs))
    assert None not in codes or any(codes), f"the two agents did not finish in {NODE_TIMEOUT:.0f} s:\n{output}"
    assert codes == [0, 0], f"exit codes {codes}:\n{output}"
    return out


@pytest.mark.slow
@pytest.mark.parametrize("parallel", ["ddp", "hsdp"])
def test_two_torchrun_nodes_form_one_world_and_match_one_process(tmp_path, parallel):
    run = two_node_torchrun(tmp_path, parallel)
    seen = [json.loads((run / f"rank{r}.json").read_text()) for r in range(4)]
    assert [s["RANK"] for s in seen] == ["0", "1", "2", "3"]
    assert {(s["WORLD_SIZE"], s["LOCAL_WORLD_SIZE"]) for s in seen} == {("4", "2")}
    nodes = {s["GROUP_RANK"] for s in seen}
    assert nodes == {"0", "1"}, "one agent per node, both in the world"
    for node in nodes:  # each node's two processes are local ranks 0 and 1 and hold neighbouring global ranks
        assert sorted(int(s["LOCAL_RANK"]) for s in seen if s["GROUP_RANK"] == node) == [0, 1]
    if parallel == "hsdp":  # the mesh (replicate=2 nodes, shard=2 processes of one node)
        assert {tuple(s["mesh_names"]) for s in seen} == {("replicate", "shard")}
        for s in seen:
            assert s["mesh_ranks"] == [[0, 1], [2, 3]]
        for shard_group in seen[0]["mesh_ranks"]:  # a shard group is one node's processes
            assert len({seen[r]["GROUP_RANK"] for r in shard_group}) == 1
    train("gpt-tiny", out=tmp_path / "single", device="cpu", **SETTINGS)
    assert_same_training(run, tmp_path / "single")
    info = ckpt.read_info(ckpt.latest_checkpoint(run))
    assert (info["world_size"], info["strategy"]) == (4, "fsdp" if parallel == "hsdp" else "ddp")


def test_global_batch_must_split_evenly(tmp_path, monkeypatch):
    from zoo.errors import TrainError
    from zoo.train import distributed

    monkeypatch.setattr(distributed, "setup", lambda device: distributed.Distributed(rank=0, world_size=3))
    with pytest.raises(TrainError, match=r"batch_size \(4\) is the batch of all 3 processes"):
        train("gpt-tiny", out=tmp_path / "run", **SETTINGS)
