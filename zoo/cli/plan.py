"""``zoo plan``: memory per device, the largest micro-batch, step time and serving, rendered from
``zoo.analysis.plan``."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from .build import Overrides, RecipeArg, load_with_overrides


class Precision(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"


class Checkpointing(str, Enum):
    none = "none"
    every = "every"
    every_k = "every_k"
    attention = "attention"


class Sharding(str, Enum):
    full = "full"
    hybrid = "hybrid"


def plan(
    recipe: RecipeArg,
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            help="Accelerator, by name in zoo/data/accelerators.yaml (h100-80gb, h200, b200, a100-80gb, l4, mi300x, "
            "tpu-v5p, cpu, ...), a plugin's, or a --gpu-spec file's. Default h100-80gb, or the file's one entry.",
        ),
    ] = None,
    gpu_spec: Annotated[
        Path | None,
        typer.Option(
            "--gpu-spec",
            help="YAML file of accelerators in the catalogue's format (title, memory, memory_gib, flops, bandwidth, "
            "link, network, per_node); they join the catalogue for this call.",
        ),
    ] = None,
    gpus: Annotated[int, typer.Option("--gpus", help="Devices the batch is split over.")] = 1,
    batch: Annotated[
        int | None,
        typer.Option("--batch", help="Sequences per micro-step, all devices together; default train.batch_size."),
    ] = None,
    seq: Annotated[
        int | None,
        typer.Option("--seq", "--seq-len", help="Tokens per sequence; default train.seq_len, else 4096 up to max_len."),
    ] = None,
    precision: Annotated[
        Precision | None,
        typer.Option("--precision", help="Autocast precision; default train.precision (auto: bf16 on a GPU)."),
    ] = None,
    checkpointing: Annotated[
        Checkpointing | None,
        typer.Option("--checkpointing", help="Activation checkpointing; default train.activation_checkpointing."),
    ] = None,
    checkpoint_every: Annotated[
        int | None, typer.Option("--checkpoint-every", help="every_k: checkpoint every k-th block.")
    ] = None,
    parallel: Annotated[
        str | None,
        typer.Option(
            "--parallel",
            help="Several devices: ddp or fsdp (auto as the trainer), or a device mesh such as "
            "replicate=2,shard=2,tensor=2 (any of the three, missing ones 1; their product is --gpus).",
        ),
    ] = None,
    sharding: Annotated[
        Sharding | None, typer.Option("--sharding", help="fsdp: full, or hybrid (within a node).")
    ] = None,
    offload: Annotated[
        bool | None,
        typer.Option("--offload/--no-offload", help="fsdp: shards of weights, gradients, AdamW in CPU memory."),
    ] = None,
    mfu: Annotated[float, typer.Option("--mfu", help="Share of the dense bf16 peak a step reaches.")] = 0.4,
    tokens: Annotated[
        float | None, typer.Option("--tokens", help="Tokens to train on (e.g. 1e9): how long they take.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print every number as one JSON object instead.")] = False,
    set_: Overrides = None,
) -> None:
    """Will a training step fit, how long will it take, what does serving need: before renting GPUs.

    Memory comes from a training step traced on fake tensors (the model is built on the meta device; nothing
    is allocated), per component, at the precision and checkpointing asked; time from FLOPs at a stated MFU.
    """
    from zoo.analysis.plan import plan as make_plan

    result = make_plan(
        load_with_overrides(recipe, set_),
        gpu=gpu,
        gpu_spec=gpu_spec,
        gpus=gpus,
        batch=batch,
        seq_len=seq,
        precision=precision.value if precision else None,
        checkpointing=checkpointing.value if checkpointing else None,
        checkpoint_every=checkpoint_every,
        parallel=parallel,
        sharding=sharding.value if sharding else None,
        offload=offload,
        mfu=mfu,
        tokens=tokens,
    )
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        _render(result)
    result.check()  # not even micro-batch 1 fits: the error (after the figures that say why)


def _render(p: Any) -> None:
    from rich.console import Group
    from rich.markup import escape
    from rich.text import Text

    from .render import console

    show = console()
    a = p.accelerator
    layout = {
        "none": "one device" if p.gpus == 1 else "no data parallelism",
        "ddp": "DDP",
        "fsdp": f"FSDP2 {p.sharding}" + (", CPU offload" if p.offload else ""),
    }
    ck = p.checkpointing + (f" (k={p.checkpoint_every})" if p.checkpoint_every else "")
    mesh = ", ".join(f"{k} {v}" for k, v in p.mesh.items())
    tensor = p.mesh["tensor"]
    group = f"tensor-parallel group of {tensor} devices" if tensor > 1 else "device"
    show.print(
        f"[bold]{escape(p.recipe)}[/bold] on {p.gpus} x {a.name} ({escape(a.title)}), {layout[p.strategy]}, mesh "
        f"{mesh}: batch {p.batch} (micro-batch {p.micro_batch} per {group}) x {p.seq_len} tokens, {p.precision}, "
        f"checkpointing {ck}"
    )
    show.print(_memory(p))
    show.print(_units(p))
    show.print(_time(p))
    show.print(_serving(p))
    notes = [Text(f"note: {n}", style="dim") for n in p.notes]
    if notes:
        show.print(Group(*notes))


def _memory(p: Any) -> Any:
    from zoo.analysis.plan import CONTEXT, RESERVE

    from .render import size, table

    m = p.memory
    t = table(f"Memory per device at micro-batch {p.micro_batch}", "", "bytes", right=("bytes",))
    tensor = p.mesh["tensor"]
    split = f", split / {tensor}" if tensor > 1 else ""
    sharded = split + (f", / {p.mesh['shard']}" if p.strategy == "fsdp" and p.mesh["shard"] > 1 else "")
    t.add_row(f"weights (fp32{sharded})", size(m.weights))
    if m.gradients == 0:
        grads = "gradients (none yet at the peak: the backward has made none)"
    else:
        grads = "gradients at the peak" + (" (+ DDP's all-reduce buckets)" if p.strategy == "ddp" else "")
    t.add_row(grads, size(m.gradients))
    t.add_row(f"optimizer state (AdamW, 2 fp32 moments{sharded})", size(m.optimizer))
    if p.strategy == "fsdp":
        t.add_row("gathered weights (outside blocks, running block)", size(m.gathered))
    t.add_row("activations kept for backward", size(m.activations))
    if m.casts:
        mixed = p.strategy == "fsdp"  # FSDP2's MixedPrecisionPolicy: only the blocks in flight are gathered in it
        kept = "the blocks in flight, FSDP's policy" if mixed else "autocast, kept"
        t.add_row(f"{p.precision} copies of the weights ({kept})", size(m.casts))
    t.add_row("temporaries (activation grads, recomputation)", size(m.temporaries))
    gpu = p.accelerator.gpu
    reserve = f"allocator reserve {RESERVE:.0%} + context {CONTEXT / 2**30:.0f} GiB" if gpu else "allocator reserve"
    t.add_row(reserve, size(m.reserve))
    verdict = "fits" if p.fits else "[bold red]does not fit[/bold red]"
    t.add_row(f"needed at the peak ({m.phase}) / available", f"{size(m.needed)} / {size(p.available)}", style="bold")
    t.add_row("", verdict)
    if m.offloaded:
        t.add_row("in CPU memory (offloaded shards)", size(m.offloaded))
    largest = f"{p.max_micro_batch:,}" if p.max_micro_batch else "[bold red]none[/bold red]"
    per = "tensor-parallel group" if p.mesh["tensor"] > 1 else "device"
    t.add_row(f"largest micro-batch per {per} that fits", largest)
    for line in p.advice:
        t.add_row(f"[yellow]try[/yellow] {line}", "")
    return t


def _units(p: Any) -> Any:
    from .render import size, table

    t = table(
        f"Activations kept per unit (micro-batch {p.micro_batch})",
        "unit",
        "count",
        "each",
        "total",
        right=("count", "each", "total"),
    )
    mixed = p.strategy == "fsdp"  # the policy casts no weight copies to keep: the traced autocast casts are not kept
    for u in p.units:
        each = u.saved_each - (u.casts_each if mixed else 0)
        if each == 0 and u.count == 1:
            continue
        t.add_row(u.name, f"{u.count}", size(each), size(each * u.count))
    casts = sum(u.casts_each * u.count for u in p.units)
    if casts and p.strategy != "fsdp":  # under FSDP the policy gathers weights per block: no copies kept per unit
        t.caption = f"of which {size(casts)}: {p.precision} copies of weights"
        t.caption_justify = "left"
    return t


def _time(p: Any) -> Any:
    from .render import short, table

    s = p.time
    t = table(
        f"Step time at MFU {s.mfu:.0%} of {short(p.accelerator.flops, 'FLOP/s')}",
        "",
        "value",
        right=("value",),
    )
    t.add_row(f"tokens per step (x grad_accum {p.grad_accum})", f"{s.tokens_per_step:,}")
    t.add_row("FLOPs per step (3 x forward)", short(s.flops, "FLOP"))
    if s.recompute_flops:
        t.add_row("  + recomputed forward (checkpointing)", short(s.recompute_flops, "FLOP"))
    t.add_row(f"compute at MFU {s.mfu:.0%}", _seconds(s.compute_s))
    t.add_row("roofline (100% of peak)", _seconds(s.roofline_s))
    if p.gpus > p.mesh["tensor"]:
        t.add_row(f"communication per device ({p.strategy})", f"{short(s.comm_bytes, 'B')}, {_seconds(s.comm_s)}")
    if p.mesh["tensor"] > 1:
        tp = f"{short(s.tensor_comm_bytes, 'B')}, {_seconds(s.tensor_comm_s)}"
        t.add_row(f"tensor-parallel all-reduces per device (tensor {p.mesh['tensor']}, not overlapped)", tp)
    overlapped = "step (communication overlapped" + (", then tensor-parallel)" if p.mesh["tensor"] > 1 else ")")
    t.add_row(overlapped, _seconds(s.step_s), style="bold")
    t.add_row("tokens per second / per day", f"{short(s.tokens_per_s)} / {short(s.tokens_per_day)}")
    if s.seconds is not None:
        hours = s.seconds / 3600
        device_hours = hours * p.gpus
        spent = f"{device_hours:,.0f}" if device_hours >= 10 else f"{device_hours:.2g}"
        t.add_row(f"{short(s.tokens)} tokens", f"{_seconds(s.seconds)}, {spent} device-hours")
    return t


def _serving(p: Any) -> Any:
    from .render import short, size, table

    s = p.serving
    t = table(f"Serving on {p.gpus} x {p.accelerator.name} (bf16 weights and KV cache)", "", "value", right=("value",))
    t.add_row("weights (bf16)", size(s.weights))
    if s.kv_bytes_per_token is None:
        t.add_row("KV cache", "none (not a generative decoder)")
        return t
    t.add_row("KV cache per token", f"{s.kv_bytes_per_token:,} B")
    if s.cross_bytes_per_sequence:
        t.add_row("cross-attention cache per sequence (its source)", size(s.cross_bytes_per_sequence))
    t.add_row(f"concurrent sequences of {s.seq_len:,} tokens that fit", f"{s.sequences:,}")
    if s.decode_tokens_per_s:
        t.add_row("decoding roofline (bandwidth), tokens/s", short(s.decode_tokens_per_s))
    return t


def _seconds(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    if s < 3600:
        return f"{s:.2f} s"
    if s < 86400 * 2:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def register(app: typer.Typer) -> None:
    app.command()(plan)
