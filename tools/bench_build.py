"""How long `zoo.build` takes for big recipes on the meta device, next to transformers on the same machine.

    python tools/bench_build.py

Prints the median of repeated builds (plugins already loaded) and, when transformers is installed, the
time it takes to build GPT-2 small from its config on the meta device, measured in the same run.
"""

from __future__ import annotations

import statistics
import time

import torch

import zoo


def median_seconds(fn, repeat: int = 7) -> float:
    fn()  # warm: imports, plugin loading, first-call caches
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    zoo.get_registry()
    results = {}
    for name in ["gpt2-small", "bert-base", "t5-small", "llama-3.2-1b", "mixtral-8x7b"]:
        results[name] = median_seconds(lambda name=name: zoo.build(name, device="meta"))
        print(f"zoo.build({name!r}, device='meta'): {results[name] * 1000:8.1f} ms")
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        print("transformers not installed: no reference measured")
        return

    def hf() -> None:
        with torch.device("meta"):
            GPT2LMHeadModel(GPT2Config())

    ref = median_seconds(hf)
    print(f"transformers GPT2LMHeadModel on meta:  {ref * 1000:8.1f} ms")
    print(f"ratio zoo / transformers (gpt2-small): {results['gpt2-small'] / ref:.2f}x")


if __name__ == "__main__":
    main()
