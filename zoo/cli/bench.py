"""``zoo bench``: prefill and decode speed per batch size and prompt length beside the device's limits, rendered
from ``zoo.bench``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from .build import Overrides
from .train import TrainDevice

MODEL_HELP = "A recipe (file or name: random weights), or a run, checkpoint, model or Hugging Face folder."


def _ints(text: str, what: str) -> list[int]:
    from zoo.errors import ArgumentError

    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ArgumentError(f"--{what} takes comma-separated whole numbers (e.g. 1,8,32), not {text!r}") from None
    if not values:
        raise ArgumentError(f"--{what} is empty: give one or more whole numbers (e.g. 1,8,32)")
    return values


def bench(
    model: Annotated[str, typer.Argument(help=MODEL_HELP)],
    batch: Annotated[str, typer.Option("--batch", help="Batch sizes, comma-separated.")] = "1",
    prompt: Annotated[str, typer.Option("--prompt", help="Prompt lengths in tokens, comma-separated.")] = "128",
    new: Annotated[int, typer.Option("--new", "--max-new-tokens", help="Tokens generated per row (at least 2).")] = 128,
    dtype: Annotated[
        str | None, typer.Option("--dtype", help="Weights and compute dtype (float32, bfloat16, float16).")
    ] = None,
    device: Annotated[TrainDevice, typer.Option("--device", help="auto: CUDA when present.")] = TrainDevice.auto,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random weights and prompts.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print every figure as one JSON object instead.")] = False,
    compile: Annotated[
        bool,
        typer.Option("--compile", help="Decode with the compiled step over a static cache (compiles per cell)."),
    ] = False,
    kernel: Annotated[
        str | None,
        typer.Option("--kernel", help="The attention kernel to decode with (zoo list kernel); default the device's."),
    ] = None,
    set_: Overrides = None,
) -> None:
    """Time prefill and decode (TTFT, TPOT near the start and the end, tokens/s, cache memory) per batch and
    prompt length, each beside its roofline from bandwidth and matmul rates measured in the same run."""
    import torch

    from zoo.bench import bench as run_bench
    from zoo.builder import build, parse_dtype
    from zoo.train.distributed import pick_device

    from .build import load_with_overrides

    batches, prompts = _ints(batch, "batch"), _ints(prompt, "prompt")
    if kernel is not None:
        from zoo.builder import resolve_kernel

        resolve_kernel(kernel)  # refused before the model is built
    target = pick_device(device.value)
    torch.manual_seed(seed)
    if Path(model).is_dir():
        from zoo.train import load_run

        net = load_run(Path(model), device=target).model
        if dtype is not None:
            net = net.to(parse_dtype(dtype))
    else:
        net = build(load_with_overrides(model, set_), device=target, dtype=dtype)
    report = run_bench(net.eval(), batches=batches, prompts=prompts, new=new, seed=seed, compile=compile, kernel=kernel)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        _render(report)


def _render(report: Any) -> None:
    from rich.markup import escape

    from .render import console, size, table

    show = console()
    r = report.rates
    show.print(
        f"[bold]{escape(report.model)}[/bold]: {report.parameters:,} parameters ({size(report.weight_bytes)}) on "
        f"{r.device}, {r.dtype}; measured here: {r.bandwidth / 1e9:,.1f} GB/s copy, "
        f"{r.matmul / 1e9:,.1f} GFLOP/s matmul"
        + ("; decoding compiled (static cache)" if report.compiled else "")
        + (f"; kernel {escape(report.kernel)}" if report.kernel else "")
    )
    prefill = table(
        "Prefill: time to first token (ms)",
        "batch x prompt",
        "TTFT",
        "tokens/s",
        "bound",
        "of bound",
        right=("TTFT", "tokens/s", "bound", "of bound"),
    )
    decode = table(
        "Decode: time per output token (ms) near the start and the end",
        "batch x prompt",
        "at",
        "start",
        "end",
        "bound",
        "of bound",
        "tokens/s",
        "cache",
        right=("start", "end", "bound", "of bound", "tokens/s", "cache"),
    )
    for c in report.cells:
        cell = f"{c.batch} x {c.prompt}"
        prefill.add_row(
            cell,
            f"{c.ttft_s * 1e3:,.1f}",
            f"{c.prefill_tokens_per_s:,.0f}",
            f"{c.prefill_bound_s * 1e3:,.2f}",
            f"{c.prefill_efficiency:.1%}",
        )
        decode.add_row(
            cell,
            f"{c.start_position}-{c.end_position}",
            f"{c.tpot_start_s * 1e3:,.2f}",
            f"{c.tpot_end_s * 1e3:,.2f}",
            f"{c.decode_bound_s * 1e3:,.3f}",
            f"{c.decode_efficiency:.1%}",
            f"{c.tokens_per_s:,.0f}",
            size(c.cache_bytes),
        )
    show.print(prefill)
    show.print(decode)
    show.print(
        "[dim]bound: the fastest this device allows, from the rates above (prefill: forward FLOPs over the matmul "
        "rate; decode, a step at the end position: weights and cache read once, or 2·params·batch FLOPs); of bound: "
        "bound / measured[/dim]"
    )


def register(app: typer.Typer) -> None:
    app.command()(bench)
