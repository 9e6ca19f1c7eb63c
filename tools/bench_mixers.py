"""Token mixers next to GQA attention of the same width: training tokens/s and decoding TPOT, in one run.

    python tools/bench_mixers.py [--width 256] [--layers 4] [--positions 32,1000,4000] [--device auto]

Each mixer is one function below returning the recipe (a dict) of a decoder of the bench's width and depth
whose attention is that mixer; ``gqa`` is the baseline (GQA attention with RoPE and a SwiGLU FFN). A mixer
whose plugin is not installed is skipped with a note. To add a mixer, add a function and a row of ``MIXERS``.

Measured per model, random weights, fp32 (bf16 on CUDA), ``torch.no_grad`` when decoding:

- training: tokens per second of forward + backward + AdamW steps on ``batch x seq_len`` tokens;
- decoding: the time per output token (TPOT) at each position P: prefill P tokens into the cache, then decode
  ``--steps`` tokens one at a time. A fixed-state mixer (RWKV, Mamba) costs the same at every position; a KV
  cache (GQA) and Hyena's input history are read whole at every step, so they cost more as P grows.

Each figure is printed with its ratio to GQA's (``x1.00`` is GQA's own): above 1 for tokens/s, below 1 for
TPOT means the mixer is faster.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

import zoo
from zoo.plugins import get_registry

VOCAB = 8192


def base(width: int, layers: int, max_len: int) -> dict[str, Any]:
    return {
        "name": "bench",
        "architecture": "decoder",
        "vocab_size": VOCAB,
        "d_model": width,
        "num_layers": layers,
        "max_len": max_len,
        "norm": {"type": "rmsnorm"},
        "ffn": {"type": "swiglu", "hidden": 4 * width},
        "head": {"type": "lm", "tie_embeddings": True},
    }


def gqa(width: int, layers: int, max_len: int) -> dict[str, Any]:
    """The baseline: GQA attention, heads of 64, a quarter as many key/value heads, RoPE."""
    heads = max(width // 64, 1)
    attention = {"type": "gqa", "num_heads": heads, "num_kv_heads": max(heads // 4, 1), "bias": False}
    return {**base(width, layers, max_len), "attention": attention, "positional": "rope"}


def rwkv(width: int, layers: int, max_len: int) -> dict[str, Any]:
    """RWKV-4 (zoo-rwkv): time mix and channel mix (its own FFN, the same 4x width), LayerNorm, ln0."""
    return {
        **base(width, layers, max_len),
        "attention": {"type": "rwkv_time_mix"},
        "ffn": {"type": "rwkv_channel_mix", "hidden": 4 * width},
        "norm": {"type": "layernorm"},
        "embed_norm": True,
        "positional": "none",
    }


def hyena(width: int, layers: int, max_len: int) -> dict[str, Any]:
    """Hyena-2 (zoo-hyena): implicit long convolutions and gates, the baseline's SwiGLU FFN."""
    return {**base(width, layers, max_len), "attention": {"type": "hyena", "order": 2}, "positional": "none"}


def mamba(width: int, layers: int, max_len: int) -> dict[str, Any]:
    """Mamba (zoo-mamba): selective-scan mixer blocks (state 16, expand 2), no FFN, as Mamba's own blocks."""
    mixer = {"type": "mamba", "state_size": 16, "expand": 2}
    return {**base(width, layers, max_len), "attention": mixer, "ffn": {"type": "none"}, "positional": "none"}


def mamba2(width: int, layers: int, max_len: int) -> dict[str, Any]:
    """Mamba-2 (zoo-mamba): SSD mixer blocks (heads of 64, state 64, chunks of 128), no FFN."""
    mixer = {"type": "mamba2", "head_dim": 64, "state_size": 64, "chunk_size": 128}
    return {**base(width, layers, max_len), "attention": mixer, "ffn": {"type": "none"}, "positional": "none"}


MIXERS: dict[str, tuple[Callable[[int, int, int], dict[str, Any]], str]] = {
    "gqa": (gqa, "zoo"),
    "rwkv": (rwkv, "zoo-rwkv"),
    "hyena": (hyena, "zoo-hyena"),
    "mamba": (mamba, "zoo-mamba"),
    "mamba2": (mamba2, "zoo-mamba"),
}
"""Name -> (recipe function, the plugin that registers its mixer)."""


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def train_tokens_per_s(model: torch.nn.Module, batch: int, seq_len: int, steps: int, device: torch.device) -> float:
    """Tokens per second of full training steps (the first, warm-up step is not timed)."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, VOCAB, (batch, seq_len), device=device)
    for i in range(steps + 1):
        if i == 1:
            sync(device)
            start = time.perf_counter()
        loss = model(x, labels=x).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    sync(device)
    return steps * batch * seq_len / (time.perf_counter() - start)


@torch.no_grad()
def tpot(model: torch.nn.Module, position: int, steps: int, device: torch.device) -> float:
    """Seconds per decoded token after a prefill of ``position`` tokens (batch 1)."""
    model.eval()
    cache = model.new_cache(1, position + steps + 1)
    x = torch.randint(0, VOCAB, (1, position), device=device)
    token = model(x, cache=cache).logits[:, -1:].argmax(-1)
    token = model(token, cache=cache).logits[:, -1:].argmax(-1)  # warm-up step, not timed
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        token = model(token, cache=cache).logits[:, -1:].argmax(-1)
    sync(device)
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--train-steps", type=int, default=3)
    parser.add_argument("--positions", default="32,1000,4000")
    parser.add_argument("--steps", type=int, default=16, help="decoded tokens timed at each position")
    parser.add_argument("--mixers", default=",".join(MIXERS))
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    positions = [int(p) for p in args.positions.split(",")]
    max_len = max(positions + [args.seq_len]) + args.steps + 2
    registered = {(c.kind, c.name) for c in get_registry()}
    needs = {
        "rwkv": ("attention", "rwkv_time_mix"),
        "hyena": ("attention", "hyena"),
        "mamba": ("attention", "mamba"),
        "mamba2": ("attention", "mamba2"),
    }
    rows: dict[str, list[float]] = {}
    for name in args.mixers.split(","):
        recipe_fn, plugin = MIXERS[name]
        if name in needs and needs[name] not in registered:
            print(f"{name}: skipped, {plugin} is not installed (pip install -e plugins/{plugin})")
            continue
        torch.manual_seed(0)
        model = zoo.build(recipe_fn(args.width, args.layers, max_len), device=device, dtype=dtype)
        params = sum(p.numel() for p in model.parameters())
        figures = [train_tokens_per_s(model, args.batch, args.seq_len, args.train_steps, device)]
        figures += [tpot(model, p, args.steps, device) for p in positions]
        rows[name] = [params, *figures]
        print(f"{name}: measured ({params / 1e6:.2f}M parameters)", flush=True)
    print(
        f"\nwidth {args.width}, {args.layers} layers, {device.type} {str(dtype).removeprefix('torch.')}; "
        f"training batch {args.batch} x {args.seq_len}; ratios to gqa"
    )
    header = f"{'mixer':<8} {'params':>8} {'train tok/s':>18}" + "".join(f" {'TPOT @' + str(p):>20}" for p in positions)
    print(header)
    ref = rows.get("gqa")
    for name, (params, train, *tpots) in rows.items():

        def ratio(value: float, i: int) -> str:
            return f" x{value / ref[i]:.2f}" if ref is not None else ""

        line = f"{name:<8} {params / 1e6:>7.2f}M {train:>10,.0f}{ratio(train, 1):>8}"
        line += "".join(f" {t * 1e3:>10.2f} ms{ratio(t, 2 + i):>7}" for i, t in enumerate(tpots))
        print(line)


if __name__ == "__main__":
    main()
