"""``zoo summary``: what a recipe's model is and what it costs, rendered from ``zoo.analysis.summarize``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from .build import Overrides, RecipeArg, load_with_overrides


def summary(
    recipe: RecipeArg,
    depth: Annotated[int, typer.Option("--depth", help="Depth of the module tree (0-100); 1: the model's parts.")] = 1,
    batch: Annotated[int, typer.Option("--batch", help="Sequences per batch (activations, KV cache, FLOPs).")] = 1,
    seq_len: Annotated[
        int | None,
        typer.Option("--seq", "--seq-len", help="Tokens per sequence; default train.seq_len, else 4096 up to max_len."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print every number as one JSON object instead.")] = False,
    set_: Overrides = None,
) -> None:
    """Parameters (counted and from the formulas), FLOPs and memory of a recipe, with its module tree.

    Large models are built on the meta device: nothing is allocated.
    """
    from zoo.analysis import summarize

    from .render import console

    width = console().width
    result = summarize(load_with_overrides(recipe, set_), batch=batch, seq_len=seq_len, depth=depth, width=width)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    _render(result, folder=recipe if Path(recipe).is_dir() else None)


def _render(s: Any, *, folder: str | None = None) -> None:
    from rich.markup import escape

    from .render import console

    show = console()
    where = "the meta device (no weights allocated)" if s.device == "meta" else f"{s.device} (random weights)"
    if folder is not None:  # a model or run: its architecture is summarised, its weights are never read
        where = f"{s.device} from the recipe of {escape(folder)} (its weights are not read: none of this needs them)"
    show.print(
        f"[bold]{escape(s.recipe.name)}[/bold]: {s.recipe.architecture}, built on {where}; "
        f"batch {s.batch} x seq_len {s.seq_len}"
    )
    if s.layers is not None:  # torchinfo adds the module tree and shapes; every count below is zoo's own
        shapes = " with output shapes" if s.layers.forward != "none" else ""
        show.print(f"[bold]Modules{shapes}[/bold] (torchinfo)")
        show.print(s.layers.text, markup=False, soft_wrap=True)
    for note in s.notes:
        show.print(f"[yellow]note:[/yellow] {escape(note)}")
    show.print(_kinds(s))
    for kind in s.counted.by_kind:
        if s.counted.by_kind[kind] == 0:
            show.print(escape(_why_none(kind, s)), style="dim")
    show.print(_layers(s))
    if s.mismatches:
        show.print("[bold red]MISMATCH[/bold red] between the counted parameters and the formulas:")
        for m in s.mismatches:
            show.print(f"  {m.where}: counted {m.counted:,}, formulas {m.analytic:,} ({m.difference:+,})")
    for missing in s.analytic.missing:
        show.print(f"[yellow]no formula[/yellow] for {escape(missing)}: the analytic count leaves it out")
    if s.routed:
        show.print(_experts(s))
    show.print(_flops(s))
    show.print(_memory(s))


def _kinds(s: Any) -> Any:
    from .render import count, share, table

    t = table(
        "Parameters by component kind",
        "kind",
        "counted",
        "formulas",
        "share",
        "",
        right=("counted", "formulas", "share"),
    )
    kinds = list(s.analytic.by_kind) + [k for k in s.counted.by_kind if k not in s.analytic.by_kind]
    for kind in kinds:
        counted, analytic = s.counted.by_kind.get(kind, 0), s.analytic.by_kind.get(kind, 0)
        t.add_row(kind, count(counted), count(analytic), share(counted, s.counted.total), _check(counted, analytic))
    total, analytic = s.counted.total, s.analytic.total
    t.add_row("total", count(total), count(analytic), "100.0%", _check(total, analytic), style="bold")
    return t


def _why_none(kind: str, s: Any) -> str:
    """Why a kind of component counts no parameters: a tied weight counted where it lives, or none at all."""
    tied = [t for t in s.counted.tied if t.name.startswith(f"{kind}.")]
    if tied:
        return f"{kind} 0: " + "; ".join(f"{t.name} is {t.owner}, counted there" for t in tied)
    return f"{kind} 0: it computes without parameters of its own"


def _check(counted: int, analytic: int) -> str:
    return "ok" if counted == analytic else "[bold red]MISMATCH[/bold red]"


def _layers(s: Any) -> Any:
    """Per-layer rows, runs of identical blocks folded into one (``blocks.0-11 x12``, figures per block)."""
    from zoo.analysis.folding import fold_layer_rows

    from .render import count, share, table

    rows = fold_layer_rows(s.counted.by_layer, s.analytic.by_layer)
    t = table(
        "Parameters by layer", "layer", "counted", "formulas", "share", "", right=("counted", "formulas", "share")
    )
    captions = ["×n: the counts of one block, the share of all n"] if any(r.repeat > 1 for r in rows) else []
    if s.recipe.layer_groups is not None:
        captions.append(f"layer_groups {s.recipe.layer_groups}: shared weights, counted at each group's first layer")
    if captions:
        t.caption = "\n".join(captions)
        t.caption_justify = "left"
    for r in rows:
        t.add_row(
            r.label,
            count(r.counted),
            count(r.analytic),
            share(r.counted_total, s.counted.total),
            _check(r.counted, r.analytic),
        )
    return t


def _experts(s: Any) -> str:
    from .render import count, share

    total, active = s.analytic.total, s.analytic.active
    return (
        f"[bold]Mixture of experts:[/bold] {count(total)} parameters in total, {count(active)} active per token "
        f"({share(active, total)}): each token passes through top_k of num_experts experts"
    )


def _flops(s: Any) -> Any:
    from zoo.analysis.flops import TRAIN_FACTOR

    from .render import short, table

    f = s.flops
    train = f"training step ({TRAIN_FACTOR}x)"
    t = table(f"FLOPs at seq_len {f.seq_len}, batch {f.batch}", "", "forward", train, right=("forward", train))
    t.add_row("per token", short(f.forward_per_token, "FLOP"), short(f.train_per_token, "FLOP"))
    t.add_row("  of which weights (2 per weight used)", short(f.matmul_per_token, "FLOP"), "")
    t.add_row("  of which attention (2·2·L·H·D per layer)", short(f.attention_per_token, "FLOP"), "")
    t.add_row("per sequence", short(f.forward_per_sequence, "FLOP"), short(f.train_per_sequence, "FLOP"))
    t.add_row("per batch", short(f.forward_per_batch, "FLOP"), short(f.train_per_batch, "FLOP"))
    return t


def _memory(s: Any) -> Any:
    from rich.console import Group
    from rich.text import Text

    from zoo.analysis.memory import ACTIVATION_FORMULA, ADAMW_NOTE, KV_CACHE_FORMULA

    from .render import size, table

    m = s.memory
    t = table("Memory", "", "bytes", right=("bytes",))
    for name, n in m.weights.items():
        t.add_row(f"weights, {name}", size(n))
    t.add_row("AdamW state, fp32 training (2 fp32 moments)", size(m.adamw_state["fp32"]))
    t.add_row("AdamW state, bf16 mixed (2 moments + fp32 master)", size(m.adamw_state["bf16_mixed"]))
    t.add_row(
        "weights + grads + AdamW, fp32 / bf16 mixed", f"{size(m.training['fp32'])} / {size(m.training['bf16_mixed'])}"
    )
    if m.kv_bytes_per_token is not None:
        t.add_row("KV cache per token (bf16)", f"{m.kv_bytes_per_token:,} B")
        t.add_row(f"KV cache at max_len {m.max_len}, one sequence", size(m.kv_bytes_at_max_len))
        t.add_row(f"KV cache, batch {m.batch} x {m.seq_len} tokens", size(m.kv_bytes_for_batch))
    else:
        t.add_row("KV cache", "none (no causal stack)")
    if m.state_bytes_per_sequence is not None:
        t.add_row("recurrent state per sequence (bf16, any length)", size(m.state_bytes_per_sequence))
    if m.cross_kv_bytes_per_source_token is not None:
        t.add_row("cross-attention K/V per source token (bf16)", f"{m.cross_kv_bytes_per_source_token:,} B")
    t.add_row(f"activations, batch {m.batch} x {m.seq_len} tokens", size(m.activation_bytes))
    notes = [f"AdamW: {ADAMW_NOTE}", f"KV cache: {KV_CACHE_FORMULA}.", f"Activations: {ACTIVATION_FORMULA}."]
    return Group(t, *(Text(n, style="dim") for n in notes))


def register(app: typer.Typer) -> None:
    app.command()(summary)
