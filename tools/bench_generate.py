"""Greedy decoding speed of zoo's KV cache next to Hugging Face ``generate`` and a minimal cache loop, in one run.

    python tools/bench_generate.py [--rounds 5] [--new-tokens 256]

The model is the GPT-2-style decoder of ``bench_train.py`` (d_model 256, 4 layers, 4 heads, vocab 8192) with
a position table of 2048, fp32 on the CPU, random weights: batch 1, a 32-token prompt, 256 new tokens (no
early stop: every run produces all of them). Rounds are interleaved and the best kept per contestant.

Also printed: the time per output token (TPOT) at position ~1000 against position ~32 (prefill 1000 tokens
vs 32, then decode 32): with a cache a step's cost barely grows with the length, since only attention
reads more keys; and the tokens/s without the cache, for scale.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

import zoo
from zoo.generate import generate
from zoo.limits import count_argument

VOCAB, D_MODEL, LAYERS, HEADS, HIDDEN, MAX_LEN = 8192, 256, 4, 4, 1024, 2048
HEAD_DIM = D_MODEL // HEADS


def zoo_model() -> nn.Module:
    overrides = {"attention.num_heads": HEADS, "ffn.hidden": HIDDEN}
    return zoo.build("gpt-tiny", vocab_size=VOCAB, d_model=D_MODEL, num_layers=LAYERS, max_len=MAX_LEN, **overrides)


class MinimalCachedGPT(nn.Module):
    """The hand-written reference: fused q/k/v, K/V appended into preallocated buffers, SDPA."""

    def __init__(self) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(MAX_LEN, D_MODEL)
        self.ln1 = nn.ModuleList(nn.LayerNorm(D_MODEL) for _ in range(LAYERS))
        self.ln2 = nn.ModuleList(nn.LayerNorm(D_MODEL) for _ in range(LAYERS))
        self.qkv = nn.ModuleList(nn.Linear(D_MODEL, 3 * D_MODEL) for _ in range(LAYERS))
        self.out = nn.ModuleList(nn.Linear(D_MODEL, D_MODEL) for _ in range(LAYERS))
        self.up = nn.ModuleList(nn.Linear(D_MODEL, HIDDEN) for _ in range(LAYERS))
        self.down = nn.ModuleList(nn.Linear(HIDDEN, D_MODEL) for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D_MODEL)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
        n, p = prompt.shape
        cache = torch.empty(LAYERS, 2, n, HEADS, p + new_tokens, HEAD_DIM)
        ids, start, out = prompt, 0, []
        for _ in range(new_tokens):
            t = ids.shape[1]
            h = self.tok(ids) + self.pos.weight[start : start + t]
            for i in range(LAYERS):
                q, k, v = self.qkv[i](self.ln1[i](h)).view(n, t, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
                cache[i, 0, :, :, start : start + t], cache[i, 1, :, :, start : start + t] = k, v
                keys, values = cache[i, 0, :, :, : start + t], cache[i, 1, :, :, : start + t]
                y = F.scaled_dot_product_attention(q, keys, values, is_causal=t > 1)
                h = h + self.out[i](y.transpose(1, 2).reshape(n, t, D_MODEL))
                h = h + self.down[i](F.gelu(self.up[i](self.ln2[i](h)), approximate="tanh"))
            ids = F.linear(self.ln(h[:, -1]), self.tok.weight).argmax(-1, keepdim=True)  # (N, 1)
            out.append(ids)
            start += t
        return torch.cat(out, dim=1)


def hf_model() -> nn.Module | None:
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return None
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=MAX_LEN,
        n_embd=D_MODEL,
        n_layer=LAYERS,
        n_head=HEADS,
        n_inner=HIDDEN,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    config._attn_implementation = "sdpa"
    return GPT2LMHeadModel(config).eval()


def best_time(run, rounds: list[float]) -> None:
    start = time.perf_counter()
    run()
    rounds.append(time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=count_argument(1, 100_000), default=5)
    parser.add_argument("--new-tokens", type=count_argument(1, 100_000), default=256)
    args = parser.parse_args()
    new = args.new_tokens
    torch.manual_seed(0)
    prompt = torch.randint(1, VOCAB, (1, 32))
    model, minimal, hf = zoo_model().eval(), MinimalCachedGPT().eval(), hf_model()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch 1, prompt 32, {new} new tokens")

    contestants = {
        "zoo (KV cache)": lambda: generate(model, prompt, max_new_tokens=new),
        "minimal cache loop": lambda: minimal.generate(prompt, new),
    }
    if hf is not None:

        def hf_generate() -> None:
            with torch.no_grad():
                hf.generate(prompt, max_new_tokens=new, min_new_tokens=new, do_sample=False, use_cache=True)

        contestants["transformers generate"] = hf_generate
    for run in contestants.values():
        run()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(args.rounds):
        for name, run in contestants.items():
            best_time(run, times[name])
    speed = {name: new / min(t) for name, t in times.items()}
    for name, s in speed.items():
        print(f"{name:<24}{s:>10,.1f} tokens/s")
    if "transformers generate" in speed:
        ratio = speed["zoo (KV cache)"] / speed["transformers generate"]
        print(f"zoo / transformers generate: {ratio:.2f}x (target >= 1.35)")
    print(f"zoo / minimal cache loop: {speed['zoo (KV cache)'] / speed['minimal cache loop']:.2f}x")

    uncached = generate(model, prompt, max_new_tokens=64, use_cache=False).stats
    print(f"zoo without cache (64 new tokens): {uncached.tokens_per_s:,.1f} tokens/s")

    tpot = {}
    for length in (32, 1000):
        long_prompt = torch.randint(1, VOCAB, (1, length))
        generate(model, long_prompt, max_new_tokens=4)
        tpot[length] = min(generate(model, long_prompt, max_new_tokens=32).stats.tpot_s for _ in range(args.rounds))
    print(
        f"TPOT at position ~32: {tpot[32] * 1e3:.2f} ms, at ~1000: {tpot[1000] * 1e3:.2f} ms "
        f"-> {tpot[1000] / tpot[32]:.2f}x (target <= 1.5)"
    )
    cached = generate(model, prompt, max_new_tokens=new).stats
    print(f"TTFT {cached.ttft_s * 1e3:.1f} ms, cache {cached.cache_bytes / 2**20:.2f} MiB for {32 + new} positions")


if __name__ == "__main__":
    main()
