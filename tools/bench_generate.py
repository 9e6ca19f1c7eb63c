"""Greedy decoding speed of zoo's KV cache next to Hugging Face ``generate`` and a minimal cache loop, in one run.

    python tools/bench_generate.py [--rounds 5] [--new-tokens 256]

The model is a GPT-2 (d_model 256, 4 layers, 4 heads, vocab 8192, a position table of 2048), fp32 on the CPU,
random weights, and the same weights in all three: transformers' ``GPT2LMHeadModel``, zoo's import of it
(``zoo.from_hf``) and the minimal loop, which copies them (and all three give the same greedy tokens, checked
first). Batch 1, a 32-token prompt, 256 new tokens (no early stop: every run produces all of them), every
contestant under ``torch.inference_mode``; transformers is given its attention mask, and runs once with its
default cache and once with its static cache. Rounds are interleaved and the best kept per contestant.

Also printed: the time per output token (TPOT) at position ~1000 against position ~32 (prefill 1000 tokens
vs 32, then decode 32): with a cache a step's cost barely grows with the length, since only attention
reads more keys; and the tokens/s without the cache, for scale.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch
import torch.nn.functional as F
from torch import nn

import zoo
from zoo.generate import generate
from zoo.limits import count_argument

VOCAB, D_MODEL, LAYERS, HEADS, HIDDEN, MAX_LEN = 8192, 256, 4, 4, 1024, 2048
HEAD_DIM = D_MODEL // HEADS


def zoo_model(hf: nn.Module | None) -> nn.Module:
    """zoo's import of ``hf`` (the same weights), or without transformers the same shape with its own."""
    if hf is None:
        overrides = {"attention.num_heads": HEADS, "ffn.hidden": HIDDEN}
        return zoo.build("gpt-tiny", vocab_size=VOCAB, d_model=D_MODEL, num_layers=LAYERS, max_len=MAX_LEN, **overrides)
    with tempfile.TemporaryDirectory() as folder:
        hf.save_pretrained(folder)
        return zoo.from_hf(folder)


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
    def load_gpt2(self, hf: nn.Module) -> MinimalCachedGPT:
        """Copy a ``GPT2LMHeadModel``'s weights (its Conv1D weights are (in, out): transposed)."""
        t = hf.transformer
        self.tok.weight.copy_(t.wte.weight)
        self.pos.weight.copy_(t.wpe.weight)
        self.ln.load_state_dict(t.ln_f.state_dict())
        for i, block in enumerate(t.h):
            self.ln1[i].load_state_dict(block.ln_1.state_dict())
            self.ln2[i].load_state_dict(block.ln_2.state_dict())
            for mine, theirs in ((self.qkv[i], block.attn.c_attn), (self.out[i], block.attn.c_proj)):
                mine.weight.copy_(theirs.weight.t())
                mine.bias.copy_(theirs.bias)
            for mine, theirs in ((self.up[i], block.mlp.c_fc), (self.down[i], block.mlp.c_proj)):
                mine.weight.copy_(theirs.weight.t())
                mine.bias.copy_(theirs.bias)
        return self

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
    torch.manual_seed(1)
    return GPT2LMHeadModel(config).eval()


def best_time(run, rounds: list[float]) -> None:
    start = time.perf_counter()
    run()
    rounds.append(time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=count_argument(1, 100_000), default=10)
    parser.add_argument("--new-tokens", type=count_argument(1, 100_000), default=256)
    parser.add_argument("--no-compile", action="store_true", help="leave out the compiled contestants (minutes)")
    args = parser.parse_args()
    new = args.new_tokens
    torch.manual_seed(0)
    prompt = torch.randint(1, VOCAB, (1, 32))
    hf = hf_model()
    model, minimal = zoo_model(hf).eval(), MinimalCachedGPT().eval()
    if hf is not None:
        minimal.load_gpt2(hf)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch 1, prompt 32, {new} new tokens")

    def inference(fn):
        def run():
            with torch.inference_mode():
                return fn()

        return run

    contestants = {
        "zoo (KV cache)": inference(lambda: generate(model, prompt, max_new_tokens=new).tokens),
        "zoo static cache": inference(lambda: generate(model, prompt, max_new_tokens=new, static_cache=True).tokens),
        "minimal cache loop": inference(lambda: minimal.generate(prompt, new).tolist()),
    }
    if not args.no_compile:
        contestants["zoo compiled"] = inference(
            lambda: generate(model, prompt, max_new_tokens=new, compile=True).tokens
        )
    if hf is not None:
        from transformers import CompileConfig

        mask = torch.ones_like(prompt)
        compiled = CompileConfig(fullgraph=True, mode="default")  # CUDA graphs do not exist on the CPU
        compiled._compile_all_devices = True  # transformers compiles on the GPU only, unless told

        def hf_generate(**cache):
            out = hf.generate(
                prompt, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, do_sample=False, **cache
            )
            return out[:, prompt.shape[1] :].tolist()

        contestants["transformers generate"] = inference(hf_generate)
        contestants["transformers static cache"] = inference(
            lambda: hf_generate(cache_implementation="static", disable_compile=True)
        )
        if not args.no_compile:
            contestants["transformers static compiled"] = inference(
                lambda: hf_generate(cache_implementation="static", compile_config=compiled)
            )
        tokens = {name: run() for name, run in contestants.items()}
        same = all(t == tokens["zoo (KV cache)"] for t in tokens.values())
        print(f"same weights in all; identical greedy tokens: {'yes' if same else 'NO: ' + str(tokens)}")
    for run in contestants.values():
        run()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(args.rounds):
        for name, run in contestants.items():
            best_time(run, times[name])
    speed = {name: new / min(t) for name, t in times.items()}
    for name, s in speed.items():
        print(f"{name:<24}{s:>10,.1f} tokens/s")
    zoo_speed = speed["zoo (KV cache)"]
    for name in ("transformers generate", "transformers static cache"):
        if name in speed:
            print(f"zoo / {name}: {zoo_speed / speed[name]:.2f}x")
    print(f"zoo / minimal cache loop: {zoo_speed / speed['minimal cache loop']:.2f}x (target >= 1.0)")
    print(f"zoo static cache / minimal cache loop: {speed['zoo static cache'] / speed['minimal cache loop']:.2f}x")
    if "zoo compiled" in speed:
        fast = speed["zoo compiled"]
        print(f"zoo compiled / zoo (KV cache): {fast / zoo_speed:.2f}x")
        for name, target in (("transformers generate", 2.0), ("transformers static compiled", 1.2)):
            if name in speed:
                print(f"zoo compiled / {name}: {fast / speed[name]:.2f}x (target >= {target})")

    rates = {}
    for batch in (1, 32):
        lengths = torch.randint(8, 33, (batch,)).tolist() if batch > 1 else [32]
        prompts = [torch.randint(1, VOCAB, (n,)).tolist() for n in lengths]  # different lengths: left-padded
        with torch.inference_mode():
            generate(model, prompts, max_new_tokens=8)
            rates[batch] = max(generate(model, prompts, max_new_tokens=64).stats.tokens_per_s for _ in range(2))
    print(
        f"batch 32 (prompts of 8..32 tokens): {rates[32]:,.0f} tokens/s, batch 1: {rates[1]:,.0f} -> "
        f"{rates[32] / rates[1]:.1f}x (target >= 10)"
    )

    uncached = generate(model, prompt, max_new_tokens=64, use_cache=False).stats
    print(f"zoo without cache (64 new tokens): {uncached.tokens_per_s:,.1f} tokens/s")

    tpot = {}
    for length in (32, 1000):
        long_prompt = torch.randint(1, VOCAB, (1, length))
        generate(model, long_prompt, max_new_tokens=4)
        tpot[length] = min(generate(model, long_prompt, max_new_tokens=32).stats.tpot_s for _ in range(args.rounds))
    print(
        f"TPOT at position ~32: {tpot[32] * 1e3:.2f} ms, at ~1000: {tpot[1000] * 1e3:.2f} ms "
        f"-> {tpot[1000] / tpot[32]:.2f}x (target <= 1.3)"
    )
    cached = generate(model, prompt, max_new_tokens=new).stats
    print(f"TTFT {cached.ttft_s * 1e3:.1f} ms, cache {cached.cache_bytes / 2**20:.2f} MiB for {32 + new} positions")


if __name__ == "__main__":
    main()
