"""Training-step throughput of zoo next to Hugging Face GPT-2 and a minimal hand-written model, in one run.

    python tools/bench_train.py [--rounds 5] [--steps 4] [--compile]

All three are the same GPT-2-style decoder (d_model 256, 4 layers, 4 heads, MLP 1024 with tanh GELU, learned
positions, tied head, vocab 8192, seq 256, batch 8, fp32, no dropout) trained on the CPU with the same step:
forward, cross-entropy, backward, gradient clipping to 1.0, fused AdamW. zoo's step is the library's own
(``Trainer.train_step``, batches drawn from the embedded text); the others run the same loop by hand.

Timings are interleaved (A B C, A B C, ...) and the best round of each is kept, so a machine shared with
other work disturbs every model alike. Also printed: the machine's fp32 matmul rate measured in the same
run, the share of it each training step achieves (model FLOPs utilisation, with the usual 6·N + 12·L·E·T
FLOPs per token), and the speed-up of ``train.compile`` (torch.compile) over eager.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from zoo.limits import count_argument
from zoo.recipe import load_recipe
from zoo.train.loop import Trainer

VOCAB, D_MODEL, LAYERS, HEADS, HIDDEN, SEQ, BATCH = 8192, 256, 4, 4, 1024, 256, 8
RECIPE = {
    "vocab_size": VOCAB,
    "d_model": D_MODEL,
    "num_layers": LAYERS,
    "max_len": SEQ,
    "attention.num_heads": HEADS,
    "ffn.hidden": HIDDEN,
    "train.batch_size": BATCH,
    "train.seq_len": SEQ,
    "train.precision": "fp32",
    "train.clip_grad": 1.0,
    "train.eval_interval": 0,
}


class MinimalBlock(nn.Module):
    """nanoGPT-style block: one fused q/k/v projection and SDPA with is_causal."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.qkv, self.out = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)
        self.up, self.down = nn.Linear(D_MODEL, HIDDEN), nn.Linear(HIDDEN, D_MODEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(n, t, 3, HEADS, D_MODEL // HEADS).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(n, t, D_MODEL)
        x = x + self.out(y)
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class MinimalGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(SEQ, D_MODEL)
        self.blocks = nn.ModuleList(MinimalBlock() for _ in range(LAYERS))
        self.ln = nn.LayerNorm(D_MODEL)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        h = self.tok(ids) + self.pos.weight[: ids.shape[1]]
        for block in self.blocks:
            h = block(h)
        logits = F.linear(self.ln(h), self.tok.weight)  # tied head
        return F.cross_entropy(logits.view(-1, VOCAB), targets.reshape(-1))


def hand_step(loss_fn: Callable[[], torch.Tensor], model: nn.Module) -> Callable[[], None]:
    """The same optimizer work as zoo's step: backward, clip to 1.0, fused AdamW, zero grads."""
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)

    def step() -> None:
        loss_fn().backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def zoo_step(compile_model: bool, run_dir: str) -> tuple[Callable[[], None], nn.Module]:
    recipe = load_recipe("gpt-tiny", **RECIPE, **{"train.compile": compile_model})
    trainer = Trainer(recipe, data=None, out=run_dir, device="cpu", resume=False, callback=None)
    counter = iter(range(1, 10**9))
    return lambda: trainer.train_step(next(counter)), trainer.model


def hf_step() -> tuple[Callable[[], None], nn.Module] | None:
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return None
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=SEQ,
        n_embd=D_MODEL,
        n_layer=LAYERS,
        n_head=HEADS,
        n_inner=HIDDEN,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    config._attn_implementation = "sdpa"
    model = GPT2LMHeadModel(config).train()
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    return hand_step(lambda: model(input_ids=ids, labels=ids).loss, model), model


def minimal_step() -> tuple[Callable[[], None], nn.Module]:
    model = MinimalGPT().train()
    ids, targets = torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, VOCAB, (BATCH, SEQ))
    return hand_step(lambda: model(ids, targets), model), model


def seconds_per_step(step: Callable[[], None], steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def matmul_rate(size: int = 1024, repeat: int = 20) -> float:
    """fp32 FLOP/s of a large square matmul: the machine's practical peak (best of three)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            a @ b
        best = max(best, 2 * size**3 * repeat / (time.perf_counter() - start))
    return best


def train_flops_per_token() -> int:
    """6 x (matmul weights) + 12 x layers x d_model x seq (attention), as in the PaLM paper's MFU."""
    weights = LAYERS * (4 * D_MODEL * D_MODEL + 2 * D_MODEL * HIDDEN) + D_MODEL * VOCAB
    return 6 * weights + 12 * LAYERS * D_MODEL * SEQ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=count_argument(1, 100_000), default=5, help="interleaved timing rounds")
    parser.add_argument(
        "--steps", type=count_argument(1, 100_000), default=4, help="training steps per round and model"
    )
    parser.add_argument("--compile", action="store_true", help="also time train.compile (takes a minute)")
    args = parser.parse_args()
    torch.manual_seed(0)
    tokens = BATCH * SEQ
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; d_model {D_MODEL}, {LAYERS} layers, "
          f"{HEADS} heads, vocab {VOCAB}, seq {SEQ}, batch {BATCH}, fp32")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        steps = {"zoo": zoo_step(False, f"{tmp}/eager")[0], "minimal": minimal_step()[0]}
        hf = hf_step()
        if hf is not None:
            steps["transformers"] = hf[0]
        if args.compile:
            compiled, _ = zoo_step(True, f"{tmp}/compiled")
            start = time.perf_counter()
            compiled()
            print(f"torch.compile of the zoo step: {time.perf_counter() - start:.0f} s (first step)")
            steps["zoo compiled"] = compiled
        for step in steps.values():  # warm-up: allocator, kernels, optimizer state
            seconds_per_step(step, 2)
        times: dict[str, list[float]] = {name: [] for name in steps}
        peak = []
        for _ in range(args.rounds):
            peak.append(matmul_rate())
            for name, step in steps.items():
                times[name].append(seconds_per_step(step, args.steps))
    rate = max(peak)
    best = {name: tokens / min(t) for name, t in times.items()}
    flops = train_flops_per_token()
    print(f"fp32 matmul rate (1024^3, best of the run): {rate / 1e9:.1f} GFLOP/s")
    print(f"{'model':<14}{'tokens/s (best)':>16}{'median':>10}{'MFU':>8}")
    for name, speed in best.items():
        median = tokens / statistics.median(times[name])
        print(f"{name:<14}{speed:>16,.0f}{median:>10,.0f}{speed * flops / rate:>8.1%}")
    print(f"zoo / minimal hand-written: {best['zoo'] / best['minimal']:.3f}x (target >= 0.97)")
    if "transformers" in best:
        print(f"zoo / transformers GPT2LMHeadModel (sdpa): {best['zoo'] / best['transformers']:.3f}x (target >= 1.05)")
    if "zoo compiled" in best:
        print(f"torch.compile gain: {best['zoo compiled'] / best['zoo']:.3f}x")


if __name__ == "__main__":
    main()
