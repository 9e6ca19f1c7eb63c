"""FSDP2 mixed precision: in bf16 / fp16 the sharded model gathers its weights in low precision
(``MixedPrecisionPolicy(param_dtype, reduce_dtype=fp32)``) and the forward runs without autocast, whose cached
casts would keep a bf16 copy of every weight on every device; ``zoo plan`` counts the gathered copies of the
blocks in flight instead of a copy of the whole model. DDP and one process keep autocast."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_distributed import SETTINGS, assert_same_training, records

from zoo.analysis.plan import plan
from zoo.errors import TrainError
from zoo.train import distributed as dist
from zoo.train import train

WORKER = """
import json, os, sys, torch
from torch import nn
import zoo.train.loop as loop
out, precision = sys.argv[1], sys.argv[2]

def no_autocast(*args, **kwargs):
    raise AssertionError("autocast entered under FSDP2")

loop.autocast = no_autocast  # the trainer's autocast: any use under FSDP2 fails the run
seen = {{}}
original_build = loop.Trainer._build

def build(self):
    original_build(self)
    linear = next(m for m in self.model.modules() if isinstance(m, nn.Linear))

    def hook(module, args, output):
        seen.update(weight=str(module.weight.dtype), output=str(output.dtype),
                    autocast=torch.is_autocast_enabled("cpu"))

    linear.register_forward_hook(hook)
    blocks = [b for b in self.model.blocks]
    seen["policies"] = [
        [str(p._mp_policy.param_dtype), str(p._mp_policy.reduce_dtype)] for p in
        (m._get_fsdp_state() for m in [*blocks, self.model])
    ]
    seen["trainer_autocast"] = type(self._autocast()).__name__

loop.Trainer._build = build
settings = {settings!r}
loop.train("gpt-tiny", out=out, device="cpu", **settings, **{{"train.parallel": "fsdp", "train.precision": precision}})
with open(os.path.join(out, f"seen{{os.environ['RANK']}}.json"), "w") as f:
    json.dump(seen, f)
"""


def fsdp_run(tmp_path: Path, precision: str) -> Path:
    out = tmp_path / f"fsdp-{precision}"
    script = tmp_path / "mp_worker.py"
    script.write_text(WORKER.format(settings=SETTINGS))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*cmd, str(script), str(out), precision], env=env, capture_output=True, text=True)
    first_error = done.stderr.find("Traceback")
    assert done.returncode == 0, done.stderr[first_error : first_error + 4000] if first_error >= 0 else done.stderr
    return out


def test_policy_gathers_in_low_precision_and_reduces_in_fp32():
    policy = dist.mixed_precision(torch.bfloat16)
    assert (policy.param_dtype, policy.reduce_dtype) == (torch.bfloat16, torch.float32)
    assert dist.mixed_precision(torch.float16).param_dtype == torch.float16
    for fp32 in (None, torch.float32):  # fp32: no policy (FSDP2's default, everything in the weights' dtype)
        assert (dist.mixed_precision(fp32).param_dtype, dist.mixed_precision(fp32).reduce_dtype) == (None, None)
    with pytest.raises(TrainError, match="choose bf16, fp16 or fp32"):
        dist.mixed_precision(torch.float64)


@pytest.mark.slow
def test_fsdp_bf16_uses_the_policy_without_autocast(tmp_path):
    run = fsdp_run(tmp_path, "bf16")
    for rank in (0, 1):
        seen = json.loads((run / f"seen{rank}.json").read_text())
        assert seen["trainer_autocast"] == "nullcontext"
        blocks = len(seen["policies"]) - 1
        assert blocks >= 1 and seen["policies"] == [["torch.bfloat16", "torch.float32"]] * (blocks + 1)
        # inside the forward, a layer's weight is the gathered bf16 copy, and autocast is off
        assert seen == {**seen, "weight": "torch.bfloat16", "output": "torch.bfloat16", "autocast": False}
    losses = [r["loss"] for r in records(run, "train")]
    assert len(losses) == SETTINGS["train.steps"] and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


@pytest.mark.slow
def test_fsdp_fp32_has_no_policy_and_follows_one_process(tmp_path):
    run = fsdp_run(tmp_path, "fp32")
    seen = json.loads((run / "seen0.json").read_text())
    assert {tuple(p) for p in seen["policies"]} == {("None", "None")}
    assert (seen["weight"], seen["autocast"]) == ("torch.float32", False)
    train("gpt-tiny", out=tmp_path / "single", device="cpu", **SETTINGS, **{"train.precision": "fp32"})
    assert_same_training(run, tmp_path / "single")


def _block_params(name: str) -> tuple[int, int]:
    """(parameters of the largest block, parameters outside the blocks) of a recipe, counted on meta tensors."""
    from zoo.builder import build
    from zoo.recipe import load_recipe

    model = build(load_recipe(name), device="meta")
    blocks = max(sum(p.numel() for p in b.parameters()) for b in model.blocks)
    total = sum(p.numel() for p in model.parameters())
    return blocks, total


MIXTRAL = {"gpu": "h100-80gb", "gpus": 8, "batch": 8, "seq_len": 4096}


def test_plan_fsdp_counts_the_gathered_blocks_not_the_whole_model():
    block, total = _block_params("mixtral-8x7b")
    fsdp = plan("mixtral-8x7b", **MIXTRAL)
    assert fsdp.strategy == "fsdp" and fsdp.precision == "bf16"
    # at most the block that runs and the next one, prefetched (the backward), in bf16
    assert 2 * block <= fsdp.memory.casts <= 2 * 2 * block
    assert fsdp.memory.casts < 0.1 * 2 * total  # the old figure: a bf16 copy of (nearly) every weight
    assert any("MixedPrecisionPolicy" in note for note in fsdp.notes)
    ddp = plan("mixtral-8x7b", **MIXTRAL, parallel="ddp")
    assert ddp.strategy == "ddp" and not any("MixedPrecisionPolicy" in note for note in ddp.notes)
    assert any("autocast to bf16" in note for note in ddp.notes)
    one = plan("mixtral-8x7b", gpu="h100-80gb", gpus=1, batch=1, seq_len=4096)
    assert ddp.memory.casts == one.memory.casts > 0  # DDP keeps autocast's casts, as one device does


def test_autocast_keeps_a_copy_of_every_block_weight():
    """What FSDP no longer keeps: autocast's cached bf16 casts, by the end of the forward, of every block."""
    from zoo.analysis.steptrace import compose, trace_step
    from zoo.recipe import load_recipe

    block, total = _block_params("mixtral-8x7b")
    trace = trace_step(load_recipe("mixtral-8x7b"), micro_batch=1, seq_len=4096, precision="bf16")
    kept = compose(trace).casts.max()
    blocks = sum(trace.block_params.values()) / 4  # fp32 bytes: parameters of all blocks
    assert 0.9 * 2 * blocks <= kept <= 2 * total
    assert plan("mixtral-8x7b", **MIXTRAL).memory.casts < 0.1 * kept
