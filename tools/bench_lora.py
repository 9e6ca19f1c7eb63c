"""LoRA against full fine-tuning of the same model: step time and peak memory, side by side, from one run.

    python tools/bench_lora.py [--rounds 3] [--steps 4] [--rank 16] [--targets attention] [--device cpu]

Both train the same Llama-style decoder (d_model 256, 4 layers, 4/2 heads, SwiGLU 704, vocab 256 bytes, seq 128,
batch 8, fp32) with zoo's own step (``Trainer.train_step``: forward, loss, backward, clipping, fused AdamW) on the
same batches; the only difference is ``train.lora``. Each configuration runs in a fresh process, alternately
(full, lora, full, lora, ...), and the best round of each is kept, so a machine shared with other work disturbs
both alike.

Memory: on CUDA, ``torch.cuda.max_memory_allocated`` over the steps; on the CPU, the process's peak resident
memory (``VmHWM``, reset before the steps) above its resident memory before the model was built: weights,
gradients, optimizer moments and activations together. Also printed, exactly: the bytes of gradients and AdamW
moments, which LoRA saves (the frozen weights keep none).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECIPE = {
    "d_model": 256,
    "num_layers": 4,
    "max_len": 128,
    "attention.num_heads": 4,
    "attention.num_kv_heads": 2,
    "ffn.hidden": 704,
    "train.batch_size": 8,
    "train.seq_len": 128,
    "train.precision": "fp32",
    "train.eval_interval": 0,
    "train.warmup_steps": 0,
}


def _rss(field: str) -> int:
    """A field of /proc/self/status in bytes (VmRSS, VmHWM); 0 where there is none (not Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def child(kind: str, steps: int, rank: int, targets: str, device: str) -> dict[str, float]:
    """One configuration in this (fresh) process: seconds per step (median) and peak memory."""
    import torch

    from zoo.recipe import load_recipe
    from zoo.train.loop import Trainer

    torch.manual_seed(0)
    overrides = dict(RECIPE)
    if kind == "lora":
        overrides["train.lora"] = {"rank": rank, "alpha": 2 * rank, "targets": targets.split(",")}
    before = _rss("VmRSS")
    cuda = device == "cuda"
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = Trainer(
            load_recipe("llama-tiny", **overrides), data=None, out=run_dir, device=device, resume=False, callback=None
        )
        trainer.train_step(1)  # warm-up: allocator, AdamW state, kernels
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        if Path("/proc/self/clear_refs").exists():
            Path("/proc/self/clear_refs").write_text("5")  # resets the peak (VmHWM) to the resident memory now
        times = []
        for step in range(2, steps + 2):
            start = time.perf_counter()
            trainer.train_step(step)
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        peak = torch.cuda.max_memory_allocated() if cuda else _rss("VmHWM") - before
        params = list(trainer.model.parameters())
        trained = [p for p in params if p.requires_grad]
        state = sum(p.numel() * p.element_size() * 3 for p in trained)  # gradient + AdamW's two moments
        trainer.close()
    return {
        "seconds": statistics.median(times),
        "peak": peak,
        "state": state,
        "trained": sum(p.numel() for p in trained),
        "total": sum(p.numel() for p in params),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--targets", default="attention", help="train.lora.targets, comma-separated")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--child", choices=("full", "lora"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.rank, args.targets, args.device)))
        return
    runs: dict[str, list[dict[str, float]]] = {"full": [], "lora": []}
    for _ in range(args.rounds):
        for kind in ("full", "lora"):
            command = [sys.executable, __file__, "--child", kind, "--steps", str(args.steps), "--rank", str(args.rank)]
            command += ["--targets", args.targets, "--device", args.device]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            runs[kind].append(json.loads(out.strip().splitlines()[-1]))
    full, lora = (
        {**r[0], "seconds": min(x["seconds"] for x in r), "peak": min(x["peak"] for x in r)} for r in runs.values()
    )
    mib = 1 << 20
    print(
        f"llama-style decoder, {full['total']:,} parameters; batch {RECIPE['train.batch_size']} x seq "
        f"{RECIPE['train.seq_len']}, fp32, {args.device}; LoRA rank {args.rank} on {args.targets}: "
        f"{lora['trained']:,} trained ({lora['trained'] / lora['total']:.2%}); best of {args.rounds} rounds, median "
        f"of {args.steps} steps"
    )
    rows = [
        ("step time (ms)", full["seconds"] * 1e3, lora["seconds"] * 1e3),
        ("peak memory (MiB)", full["peak"] / mib, lora["peak"] / mib),
        ("gradients + AdamW moments (MiB)", full["state"] / mib, lora["state"] / mib),
    ]
    print(f"{'':34}{'full':>12}{'lora':>12}{'lora / full':>14}")
    for name, a, b in rows:
        print(f"{name:34}{a:12.1f}{b:12.1f}{b / a if a else float('nan'):14.2f}")


if __name__ == "__main__":
    main()
