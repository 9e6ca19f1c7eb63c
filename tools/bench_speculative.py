"""Speculative decoding beside plain cached decoding, measured in one run: a 12-layer target and a 2-layer draft
(gpt-tiny's width), both trained briefly on the embedded text so that the draft guesses the target's tokens
as a real draft does. Prints the acceptance rate, new tokens per target pass and the speed-up, and checks that
the greedy tokens are identical.

    python tools/bench_speculative.py                  # 300 training steps each, 128 new tokens, k = 2, 4, 6
    python tools/bench_speculative.py --steps 100 --new 64
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from zoo.generate import generate
from zoo.speculative import speculative_generate
from zoo.train import load_run, train

PROMPTS = ["The ", "A module ", "In Python, ", "def "]


def trained(layers: int, steps: int, out: Path):
    overrides = {"num_layers": layers, "max_len": 512, "train.steps": steps, "train.eval_interval": steps}
    overrides["train.batch_size"] = 16
    train("gpt-tiny", out=out, device="cpu", **overrides)
    return load_run(out)


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        target = trained(12, args.steps, Path(tmp) / "target")
        draft = trained(2, args.steps, Path(tmp) / "draft")
    tok = target.tokenizer
    prompts = [tok.encode(p) for p in PROMPTS]
    plain_s, plain = best_of(lambda: generate(target.model, prompts[:1], max_new_tokens=args.new), args.repeats)
    rows = []
    for k in (2, 4, 6):
        spec_s, spec = best_of(
            lambda k=k: speculative_generate(
                target.model, draft.model, prompts[:1], max_new_tokens=args.new, draft_tokens=k
            ),
            args.repeats,
        )
        rows.append((k, spec_s, spec))
        assert spec.tokens == plain.tokens, f"k={k}: speculative greedy tokens differ from the target's"
    print(
        f"target: 12 layers, draft: 2 layers (gpt-tiny width), {args.steps} training steps each; one prompt, "
        f"{args.new} new tokens, greedy, fp32, 1 thread"
    )
    print(f"plain cached decoding: {plain_s * 1e3:8.1f} ms  ({args.new / plain_s:6.1f} tokens/s)")
    for k, spec_s, spec in rows:
        s = spec.stats
        print(
            f"speculative, k = {k}:   {spec_s * 1e3:8.1f} ms  ({args.new / spec_s:6.1f} tokens/s)  "
            f"speed-up {plain_s / spec_s:4.2f}x  acceptance {s.acceptance_rate:5.1%}  "
            f"tokens per target pass {s.tokens_per_target_pass:4.2f}  identical tokens: yes"
        )


if __name__ == "__main__":
    main()
