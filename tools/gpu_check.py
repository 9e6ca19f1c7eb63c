"""One command to check zoo on a CUDA GPU: correctness first, then throughput and MFU.

    python tools/gpu_check.py [--quick]

1. Generation: cached greedy decoding equals recomputation (fp32) for every decoder and encoder-decoder
   tiny recipe and the GQA / MQA / RoPE / ALiBi / MoE variants, on the GPU.
2. Training on the GPU: the default precision is bf16 autocast; pinned, non-blocking copies; fused AdamW.
   gpt-tiny must learn (held-out loss well below its start); fp16 with loss scaling and torch.compile run
   and stay finite; a checkpoint resumes to exactly the loss of the uninterrupted run.
3. Throughput: a GPT-2-small-sized decoder (124M; d_model 768, 12 layers, seq 1024) in bf16, eager and
   compiled: tokens/s and MFU against the bf16 matmul rate measured in the same run (6·N + 12·L·E·T FLOPs
   per token), plus decoding tokens/s, TTFT and TPOT at batch 1 and 16.
4. zoo plan against the GPU: a llama-3.2-1b-sized decoder (1.24B) in bf16 at seq 2048, micro-batch 2 and 8:
   the predicted peak of a training step vs torch.cuda.max_memory_allocated (within 10%), and the step time
   predicted at the second batch from the MFU the first one achieved vs the measured one (informational).
5. Decoding against its roofline: ``zoo bench`` of the llama-3.2-1b-sized decoder in bf16 with random weights at
   batch 1 and 8, prompt 128, 128 new tokens: TPOT next to the bound of reading the weights and the cache at the
   memory bandwidth measured in the same run, eager and compiled (CUDA graphs; batch 1 must reach 70% of the
   bound), transformers' static-cache compiled generate beside it, and speculative decoding with a 2-layer draft
   gives the target's greedy tokens. Section 1 also checks the static cache and compiled decoding.

Exits 0 when every check passes, 1 when one fails, 2 when there is no CUDA device.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

FAILURES: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"  [{'ok' if ok else 'FAIL'}] {what}")
    if not ok:
        FAILURES.append(what)


def generation_checks() -> None:
    import zoo
    from zoo.generate import generate

    print("1. cached greedy decoding == recomputation, on cuda")
    variants = {
        "gpt-tiny": ("gpt-tiny", {}),
        "llama-tiny": ("llama-tiny", {}),
        "moe-tiny": ("moe-tiny", {}),
        "t5-tiny": ("t5-tiny", {}),
        "mqa": ("gpt-tiny", {"attention": {"type": "mqa", "num_heads": 4}}),
        "alibi": ("gpt-tiny", {"positional.type": "alibi"}),
        "rope": ("gpt-tiny", {"positional.type": "rope"}),
    }
    for label, (name, overrides) in variants.items():
        torch.manual_seed(0)
        model = zoo.build(name, device="cuda", init_std=0.3, **overrides).eval()
        prompts = torch.randint(1, 256, (4, 12)).tolist()
        cached = generate(model, prompts, max_new_tokens=48).tokens
        recomputed = generate(model, prompts, max_new_tokens=48, use_cache=False).tokens
        check(cached == recomputed, f"{label}: {sum(map(len, cached))} tokens identical")
        static = generate(model, prompts, max_new_tokens=48, static_cache=True).tokens
        check(static == recomputed, f"{label}: static cache identical")
    for name in ("llama-tiny", "t5-tiny"):  # inductor with CUDA graphs over the static cache
        torch.manual_seed(0)
        model = zoo.build(name, device="cuda", init_std=0.3).eval()
        prompts = [torch.randint(1, 256, (n,)).tolist() for n in (5, 12, 9, 1)]
        recomputed = generate(model, prompts, max_new_tokens=32, use_cache=False).tokens
        compiled = [generate(model, prompts, max_new_tokens=32, compile=True).tokens for _ in range(2)]
        check(all(c == recomputed for c in compiled), f"{name}: compiled (CUDA graphs) identical, twice")


def training_checks(root: Path, quick: bool) -> None:
    from zoo.train import read_metrics, train

    print("2. training on cuda")
    steps = 300 if quick else 800
    settings = {"train.steps": steps, "train.eval_interval": steps // 4, "train.checkpoint_interval": steps // 2}
    start = time.perf_counter()
    result = train("gpt-tiny", out=root / "bf16", device="cuda", **settings)
    seconds = time.perf_counter() - start
    first = next(r for r in read_metrics(root / "bf16") if r["split"] == "eval")
    speed = [r["tokens_per_s"] for r in read_metrics(root / "bf16") if r.get("tokens_per_s")]
    check(
        result.eval["loss"] < first["loss"] - 0.3 and result.eval["loss"] < 2.3,
        f"gpt-tiny bf16: held-out loss {first['loss']:.3f} (step {first['step']}) -> {result.eval['loss']:.3f} "
        f"(step {steps}) in {seconds:.0f} s, {max(speed):,.0f} tokens/s",
    )
    from zoo.train import load_run

    check(load_run(root / "bf16").info["strategy"] == "none", "checkpoint written and loadable")
    for precision in ("fp16", "fp32"):
        r = train("gpt-tiny", out=root / precision, device="cuda", **{"train.steps": 30, "train.precision": precision})
        check(bool(torch.isfinite(torch.tensor(r.train_loss))), f"{precision}: 30 steps, loss {r.train_loss:.3f}")
    r = train("llama-tiny", out=root / "compiled", device="cuda", **{"train.steps": 30, "train.compile": True})
    check(bool(torch.isfinite(torch.tensor(r.train_loss))), f"torch.compile: 30 steps, loss {r.train_loss:.3f}")

    class Stop(Exception):
        pass

    def stop_at_10(event) -> None:
        if event.kind == "checkpoint" and event.step == 10:
            raise Stop

    exact = {"train.steps": 20, "train.checkpoint_interval": 10, "train.precision": "fp32"}
    whole = train("gpt-tiny", out=root / "whole", device="cuda", **exact)
    try:
        train("gpt-tiny", out=root / "split", device="cuda", callback=stop_at_10, **exact)
    except Stop:
        pass
    split = train("gpt-tiny", out=root / "split", device="cuda", resume=True, **exact)
    check(
        abs(split.train_loss - whole.train_loss) < 1e-4,
        f"resume: loss {split.train_loss:.6f} vs uninterrupted {whole.train_loss:.6f}",
    )


def matmul_rate(dtype: torch.dtype, size: int = 8192, repeat: int = 20) -> float:
    a, b = torch.randn(size, size, device="cuda", dtype=dtype), torch.randn(size, size, device="cuda", dtype=dtype)
    a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        a @ b
    torch.cuda.synchronize()
    return 2 * size**3 * repeat / (time.perf_counter() - start)


def throughput(root: Path, quick: bool) -> None:
    from zoo.recipe import load_recipe
    from zoo.train.loop import Trainer

    print("3. throughput: GPT-2 small (124M), seq 1024, bf16 autocast, fused AdamW")
    peak = matmul_rate(torch.bfloat16)
    print(f"  bf16 matmul rate (8192^3): {peak / 1e12:.0f} TFLOP/s")
    batch = 16
    e, layers, seq, vocab = 768, 12, 1024, 50257
    flops = 6 * (layers * 12 * e * e + e * vocab) + 12 * layers * e * seq
    for compiled in (False, True):
        recipe = load_recipe(
            "gpt2-small",
            dropout=0.0,
            **{"train.batch_size": batch, "train.seq_len": seq, "train.compile": compiled, "train.eval_interval": 0},
        )
        trainer = Trainer(recipe, data=None, out=root / f"gpt2-{compiled}", device="cuda", resume=False, callback=None)
        for step in range(1, 4):
            trainer.train_step(step)
        torch.cuda.synchronize()
        n = 5 if quick else 15
        start = time.perf_counter()
        for step in range(4, 4 + n):
            trainer.train_step(step)
        torch.cuda.synchronize()
        tokens_per_s = n * batch * seq / (time.perf_counter() - start)
        label = "compiled" if compiled else "eager"
        print(f"  training {label}: {tokens_per_s:,.0f} tokens/s, MFU {tokens_per_s * flops / peak:.1%}")
        trainer.close()
        del trainer
        torch.cuda.empty_cache()

    import zoo
    from zoo.generate import generate

    model = zoo.build("gpt2-small", device="cuda", dropout=0.0).eval().to(torch.bfloat16)
    for n in (1, 16):
        prompt = torch.randint(0, vocab, (n, 128)).tolist()
        generate(model, prompt, max_new_tokens=8)
        st = generate(model, prompt, max_new_tokens=256).stats
        print(
            f"  decoding bf16, batch {n}, prompt 128, 256 new: {st.tokens_per_s:,.0f} tokens/s, "
            f"TTFT {st.ttft_s * 1e3:.1f} ms, TPOT {st.tpot_s * 1e3:.2f} ms, cache {st.cache_bytes / 2**20:.0f} MiB"
        )
    equal = (
        generate(model, prompt[:2], max_new_tokens=64).tokens
        == generate(model, prompt[:2], max_new_tokens=64, use_cache=False).tokens
    )
    print(f"  bf16 gpt2-small cached == recomputed over 64 tokens: {equal} (informational: bf16 may round apart)")


def plan_checks(root: Path, quick: bool) -> None:
    from zoo.analysis.plan import accelerators, plan
    from zoo.recipe import load_recipe
    from zoo.train.loop import Trainer

    print("4. zoo plan vs the GPU: llama-3.2-1b-sized decoder, bf16 autocast, seq 2048, fused AdamW")
    name = torch.cuda.get_device_name().lower()
    known = {"h200": "h200", "h100": "h100-80gb", "a100-sxm4-40gb": "a100-40gb", "a100": "a100-80gb", "l4": "l4"}
    gpu = next((spec for key, spec in known.items() if key in name), "h100-80gb")
    print(f"  accelerator spec: {gpu} ({accelerators()[gpu].title})")
    mfu = None
    for batch in (2, 8):
        settings = {"train.batch_size": batch, "train.seq_len": 2048, "train.precision": "bf16"}
        recipe = load_recipe("llama-3.2-1b", **settings, **{"train.eval_interval": 0})
        predicted = plan(recipe, gpu=gpu, gpus=1, mfu=mfu or 0.4)
        try:
            torch.cuda.empty_cache()
            before = torch.cuda.memory_allocated()
            trainer = Trainer(recipe, data=None, out=root / f"plan-{batch}", device="cuda", resume=False, callback=None)
            trainer.train_step(1)  # the optimizer state exists from here on, as the plan assumes
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            trainer.train_step(2)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - before
            steps = 2 if quick else 5
            start = time.perf_counter()
            for step in range(3, 3 + steps):
                trainer.train_step(step)
            torch.cuda.synchronize()
            seconds = (time.perf_counter() - start) / steps
            trainer.close()
            del trainer
        except torch.cuda.OutOfMemoryError:
            check(
                not predicted.fits,
                f"batch {batch}: out of memory; the plan said it needs {predicted.memory.needed / 2**30:.2f} GiB",
            )
            torch.cuda.empty_cache()
            continue
        m = predicted.memory
        check(
            abs(m.peak / peak - 1) < 0.10,
            f"batch {batch}: predicted peak {m.peak / 2**30:.2f} GiB (weights {m.weights / 2**30:.2f}, optimizer "
            f"{m.optimizer / 2**30:.2f}, gradients {m.gradients / 2**30:.2f}, activations "
            f"{(m.activations + m.casts + m.temporaries) / 2**30:.2f}) vs max_memory_allocated {peak / 2**30:.2f} GiB",
        )
        achieved = (predicted.time.flops + predicted.time.recompute_flops) / seconds / predicted.accelerator.flops
        if mfu is None:
            print(f"  batch {batch}: step {seconds * 1e3:.0f} ms, MFU achieved {achieved:.1%} of the spec's peak")
            mfu = min(1.0, max(achieved, 1e-3))
        else:
            print(
                f"  batch {batch}: step predicted {predicted.time.step_s * 1e3:.0f} ms at the MFU of batch 2 "
                f"({mfu:.1%}) vs measured {seconds * 1e3:.0f} ms ({predicted.time.step_s / seconds - 1:+.1%}); "
                f"MFU here {achieved:.1%} (informational)"
            )
        torch.cuda.empty_cache()


def decode_checks() -> None:
    import zoo
    from zoo.bench import bench
    from zoo.generate import generate
    from zoo.speculative import speculative_generate

    print("5. decoding vs its roofline: llama-3.2-1b-sized decoder, bf16, random weights")
    torch.manual_seed(0)
    model = zoo.build("llama-3.2-1b", device="cuda", dtype="bfloat16").eval()
    report = bench(model, batches=(1, 8), prompts=(128,), new=128)
    r = report.rates
    print(f"   measured: {r.bandwidth / 1e9:,.0f} GB/s copy, {r.matmul / 1e12:,.0f} TFLOP/s bf16 matmul")
    compiled = bench(model, batches=(1, 8), prompts=(128,), new=128, rates=r, compile=True)
    for label, rep in (("eager", report), ("compiled", compiled)):
        for c in rep.cells:
            print(
                f"   {label} batch {c.batch} x {c.prompt}: TTFT {c.ttft_s * 1e3:.1f} ms, TPOT "
                f"{c.tpot_start_s * 1e3:.2f} ms at {c.start_position} / {c.tpot_end_s * 1e3:.2f} ms at "
                f"{c.end_position}, bound {c.decode_bound_s * 1e3:.3f} ms ({c.decode_efficiency:.0%} of it), "
                f"{c.tokens_per_s:,.0f} tokens/s"
            )
    one = compiled.cells[0]
    check(one.decode_efficiency >= 0.7, f"compiled batch-1 decoding at {one.decode_efficiency:.0%} of the bound")
    hf_static_compiled(model, one.tokens_per_s)
    draft = zoo.build("llama-3.2-1b", device="cuda", dtype="bfloat16", num_layers=2).eval()
    prompt = [list(range(1, 33))]
    expected = generate(model, prompt, max_new_tokens=32).tokens
    out = speculative_generate(model, draft, prompt, max_new_tokens=32, draft_tokens=4)
    check(out.tokens == expected, "speculative greedy decoding gives the target's tokens on the GPU")
    del model, draft
    torch.cuda.empty_cache()


def hf_static_compiled(model: torch.nn.Module, zoo_tokens_per_s: float) -> None:
    """transformers' static-cache compiled generate of the same weights (``zoo.hf.to_hf``), batch 1, prompt 128,
    128 new tokens, beside zoo's compiled figure (informational)."""
    try:
        from zoo.hf import to_hf
    except ImportError:
        print("   transformers is not installed: no side-by-side figure")
        return
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as folder:
        to_hf(model, folder)
        hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).to("cuda").eval()
    prompt = torch.randint(1, 1000, (1, 128), device="cuda")
    mask = torch.ones_like(prompt)

    def run() -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        hf.generate(
            prompt, attention_mask=mask, max_new_tokens=128, min_new_tokens=128, do_sample=False,
            cache_implementation="static",
        )  # fmt: skip
        torch.cuda.synchronize()
        return 128 / (time.perf_counter() - start)

    with torch.inference_mode():
        run()
        run()  # compiled (transformers compiles static-cache generation on CUDA), then warm
        rate = max(run() for _ in range(3))
    print(
        f"   transformers static cache, compiled: {rate:,.0f} tokens/s; zoo compiled {zoo_tokens_per_s:,.0f} "
        f"-> {zoo_tokens_per_s / rate:.2f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (about two minutes on an H100/H200)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: CUDA is not available (torch sees no GPU); run this on a machine with an NVIDIA GPU.")
        return 2
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, CUDA {torch.version.cuda}")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        generation_checks()
        training_checks(Path(tmp), args.quick)
        throughput(Path(tmp), args.quick)
        try:
            plan_checks(Path(tmp), args.quick)
        except Exception as exc:  # noqa: BLE001 - a failing section is reported, the script goes on
            check(False, f"zoo plan section: {type(exc).__name__}: {exc}")
        try:
            decode_checks()
        except Exception as exc:  # noqa: BLE001 - a failing section is reported, the script goes on
            check(False, f"decoding section: {type(exc).__name__}: {exc}")
    verdict = "all checks passed" if not FAILURES else f"{len(FAILURES)} FAILED: " + "; ".join(FAILURES)
    print(f"{verdict} ({time.perf_counter() - start:.0f} s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
