"""One process against 4 (FSDP, tensor parallelism, HSDP) on the same global batch: step times side by side.

    python tools/bench_parallel.py [--recipe llama-tiny] [--steps 6] [--batch 8] [--seq 128] [--device cpu]
                                   [--processes 4] [--set d_model=256 ...]

Every configuration trains the same model with zoo's own step (``Trainer.train_step``: forward, loss, backward,
clipping, AdamW) on the same global batches of ``--batch`` sequences, in fp32: one process, then ``--processes``
processes under torchrun with ``train.parallel`` a mesh: ``{shard: P}`` (FSDP2), ``{tensor: 2, shard: P/2}``
(tensor parallelism inside FSDP), ``{replicate: 2, shard: P/2}`` (HSDP) and ``{tensor: P}``. The step time is the
median over ``--steps`` steps after one warm-up step, the slowest rank's. The ratio is one process's time over
the configuration's: the speed-up on the same work.

On a CPU (gloo), the processes share the machine's cores: with fewer cores than processes the ratios measure
communication and scheduling overhead rather than a speed-up. The same script on a GPU node (``--device cuda``,
nccl) gives the real speed-ups.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL = {"d_model": 256, "num_layers": 4, "attention.num_heads": 8, "attention.num_kv_heads": 4, "ffn.hidden": 704}
"""llama-tiny widened (8/4 heads, so that 4 tensor-parallel ranks split its key/value heads too)."""

WORKER = """
import json, sys
sys.path.insert(0, {tools!r})
from bench_parallel import measure
result = measure({recipe!r}, {overrides!r}, {mesh!r}, {steps!r}, {device!r})
if result is not None:
    with open({out!r}, "w") as f:
        json.dump(result, f)
"""


def measure(recipe: str, overrides: dict, mesh: dict | None, steps: int, device: str) -> dict | None:
    """Median seconds per step of this process's trainer, the slowest rank's (rank 0 returns it; others None)."""
    import torch
    import torch.distributed as dist

    from zoo.recipe import load_recipe
    from zoo.train.loop import Trainer

    settings = dict(overrides)
    if mesh is not None:
        settings["train.parallel"] = mesh
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = Trainer(
            load_recipe(recipe, **settings), data=None, out=run_dir, device=device, resume=False, callback=None
        )
        trainer.train_step(1)  # warm-up: AdamW state, allocator, process-group buffers
        times = []
        for step in range(2, steps + 2):
            if dist.is_initialized():
                dist.barrier()
            start = time.perf_counter()
            trainer.train_step(step)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        seconds = torch.tensor(statistics.median(times))
        if dist.is_initialized():
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        rank = dist.get_rank() if dist.is_initialized() else 0
        trainer.close()
    return {"seconds": float(seconds)} if rank == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="llama-tiny")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="recipe overrides")
    args = parser.parse_args()
    P = args.processes
    overrides: dict = {
        **(MODEL if args.recipe == "llama-tiny" else {}),
        "train.batch_size": args.batch,
        "train.seq_len": args.seq,
        "train.precision": "fp32",
        "train.warmup_steps": 0,
        "train.eval_interval": 0,
    }
    for item in args.set:
        key, value = item.split("=", 1)
        overrides[key] = json.loads(value) if value[:1].isdigit() or value[:1] in "[{-" else value
    configurations: dict[str, dict | None] = {
        "1 process": None,
        f"FSDP {{shard: {P}}}": {"shard": P},
        f"TP + FSDP {{tensor: 2, shard: {P // 2}}}": {"tensor": 2, "shard": P // 2},
        f"HSDP {{replicate: 2, shard: {P // 2}}}": {"replicate": 2, "shard": P // 2},
        f"TP {{tensor: {P}}}": {"tensor": P},
    }
    tools = str(Path(__file__).resolve().parent)
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // P)) if args.device == "cpu" else "1"}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, mesh in configurations.items():
            out = Path(tmp) / "result.json"
            script = Path(tmp) / "worker.py"
            script.write_text(
                WORKER.format(
                    tools=tools,
                    recipe=args.recipe,
                    overrides=overrides,
                    mesh=mesh,
                    steps=args.steps,
                    device=args.device,
                    out=str(out),
                )
            )
            if mesh is None:
                command = [sys.executable, str(script)]
                run_env = {**os.environ}
            else:
                command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(P)]
                command.append(str(script))
                run_env = env
            done = subprocess.run(command, env=run_env, capture_output=True, text=True)
            if done.returncode != 0:
                tail = (
                    done.stderr[done.stderr.find("Traceback") :][:2000]
                    if "Traceback" in done.stderr
                    else done.stderr[-2000:]
                )
                print(f"{label}: failed\n{tail}", file=sys.stderr)
                continue
            seconds[label] = json.loads(out.read_text())["seconds"]
    one = seconds.get("1 process")
    print(
        f"{args.recipe}, global batch {args.batch} x seq {args.seq}, fp32, {args.device}, {os.cpu_count()} cores; "
        f"median of {args.steps} steps after a warm-up, the slowest rank's"
    )
    print(f"{'':36}{'step (ms)':>12}{'1 process / this':>20}")
    for label, s in seconds.items():
        ratio = one / s if one else float("nan")
        print(f"{label:36}{s * 1e3:12.1f}{ratio:20.2f}")


if __name__ == "__main__":
    main()
