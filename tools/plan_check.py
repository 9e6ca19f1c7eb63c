"""``zoo plan``'s memory predictions beside measurements: print the table of predicted vs measured peaks.

    python tools/plan_check.py            # tiny recipes, the ~100M decoder, FSDP2 on 2 processes, plan timing
    python tools/plan_check.py --quick    # tiny recipes only
    python tools/plan_check.py --sections 100m fsdp

Predicted: one training step traced on fake tensors (``zoo.analysis.steptrace``: one block of each kind,
composed over the stack), laid out per device by ``zoo.analysis.plan``. Measured: the trainer's own second
step (``Trainer.train_step``, after a first one created the optimizer state) on real CPU tensors under the
same live-tensor-bytes tracker (``zoo.analysis.live.LiveBytes``). FSDP2: ``torchrun --nproc_per_node 2``
on the CPU (gloo), each rank measuring its own step. Then ``zoo plan mixtral-8x7b --gpu h100-80gb --gpus 8
--batch 8 --seq 4096`` is timed (wall and CPU time: on a loaded machine the wall clock says little).

Exits 1 when a prediction is more than 10% off its measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

TOLERANCE = 0.10
TINY = ["gpt-tiny", "bert-tiny", "t5-tiny", "vit-tiny", "llama-tiny", "moe-tiny"]
DECODER_100M: dict[str, Any] = {
    "name": "llama-100m",
    "vocab_size": 32000,
    "d_model": 768,
    "num_layers": 12,
    "max_len": 1024,
    "attention": {"type": "gqa", "num_heads": 12, "num_kv_heads": 4, "bias": False},
    "ffn": {"type": "swiglu", "hidden": 2048},
    "train.batch_size": 4,
    "train.seq_len": 512,
}
"""A Llama-style decoder of 100.1M parameters (llama-tiny, widened), trained at batch 4 x 512 tokens: its
activations (not its weights, gradients and AdamW state) make the peak, so checkpointing shows."""
SECTIONS = ("tiny", "100m", "fsdp", "time")
ROWS: list[tuple[str, ...]] = []
LINE = "  {:14s} {:4s} {:6s} {:>13s} {:>10s} {:>10s} {:>7s}"
FAILED: list[str] = []


def mib(n: float) -> str:
    return f"{n / 2**20:,.2f}"


def recipe_for(base: str, overrides: dict[str, Any]) -> Any:
    from zoo.recipe import load_recipe

    return load_recipe(base, **overrides)


def settings(precision: str, checkpointing: str) -> dict[str, Any]:
    return {"train.precision": precision, "train.activation_checkpointing": checkpointing}


def measured_peak(recipe: Any, run: Path) -> int:
    from zoo.analysis.live import LiveBytes
    from zoo.train.loop import Trainer

    trainer = Trainer(recipe, data=None, out=run, device="cpu", resume=False, callback=None)
    try:
        trainer.train_step(1)
        with LiveBytes(trainer.model, trainer.optimizer) as live:
            trainer.train_step(2)
        return live.peak
    finally:
        trainer.close()


def record(label: str, precision: str, checkpointing: str, shape: str, predicted: int, measured: int) -> None:
    error = predicted / measured - 1
    ROWS.append((label, precision, checkpointing, shape, mib(predicted), mib(measured), f"{error:+.2%}"))
    print(LINE.format(label, precision, checkpointing, shape, mib(predicted), mib(measured), f"{error:+.2%}"))
    if abs(error) > TOLERANCE:
        FAILED.append(f"{label} {precision} {checkpointing}: {error:+.2%}")


def single_device(base: str, label: str, extra: dict[str, Any], root: Path) -> None:
    from zoo.analysis.plan import plan

    for precision in ("fp32", "bf16"):
        for checkpointing in ("none", "every"):
            recipe = recipe_for(base, {**extra, **settings(precision, checkpointing)})
            p = plan(recipe, gpu="cpu", gpus=1)
            measured = measured_peak(recipe, root / f"{label}-{precision}-{checkpointing}")
            record(label, precision, checkpointing, f"{p.batch}x{p.seq_len}", p.memory.peak, measured)


WORKER = """
import json, os, sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {tools!r})
from plan_check import measured_peak, recipe_for
base, overrides, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
peak = measured_peak(recipe_for(base, overrides), os.path.join(out, "run"))
with open(os.path.join(out, f"peak{{os.environ['RANK']}}.json"), "w") as f:
    json.dump(peak, f)
"""


def fsdp(base: str, label: str, extra: dict[str, Any], checkpointing: str, root: Path) -> None:
    """Each of 2 processes measures its own step; the plan predicts one device's."""
    from zoo.analysis.plan import plan

    overrides = {**extra, **settings("fp32", checkpointing), "train.parallel": "fsdp"}
    out = root / f"fsdp-{label}-{checkpointing}"
    out.mkdir()
    script = root / "fsdp_worker.py"
    script.write_text(WORKER.format(tools=str(Path(__file__).resolve().parent)))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*cmd, str(script), base, json.dumps(overrides), str(out)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        FAILED.append(f"fsdp {label}: torchrun failed")
        print(done.stderr[-3000:])
        return
    p = plan(recipe_for(base, overrides), gpu="cpu", gpus=2)
    shape = f"{p.micro_batch}x{p.seq_len}/rank"
    for rank in (0, 1):
        measured = json.loads((out / f"peak{rank}.json").read_text())
        record(f"{label} r{rank}", "fp32", checkpointing, shape, p.memory.peak, measured)


def time_plan() -> None:
    args = ["plan", "mixtral-8x7b", "--gpu", "h100-80gb", "--gpus", "8", "--batch", "8", "--seq", "4096"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "zoo.cli", *args], capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], capture_output=True)
    torch_wall = time.perf_counter() - start
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\nzoo {' '.join(args)}: {wall:.2f} s wall, {cpu:.2f} s CPU "
        f"(here `import torch` alone takes {torch_wall:.2f} s wall; load average {load:.1f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the tiny recipes only")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="what to run")
    args = parser.parse_args()
    run = {"tiny"} if args.quick else set(args.sections)
    warnings.simplefilter("ignore")
    print(LINE.format("model", "prec", "ckpt", "batch x seq", "pred MiB", "meas MiB", "error"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "tiny" in run:
            for name in TINY:
                single_device(name, name, {}, root)
        if "100m" in run:
            single_device("llama-tiny", "llama-100m", DECODER_100M, root)
        if "fsdp" in run:
            for checkpointing in ("none", "every"):
                fsdp("gpt-tiny", "gpt-tiny fsdp", {}, checkpointing, root)
            for checkpointing in ("none", "every"):
                fsdp("llama-tiny", "100m fsdp", DECODER_100M, checkpointing, root)
        if "time" in run:
            time_plan()
    verdict = "all within 10%" if not FAILED else f"{len(FAILED)} beyond 10%: " + "; ".join(FAILED)
    print(verdict)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
