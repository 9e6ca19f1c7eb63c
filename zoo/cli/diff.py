"""``zoo diff``: two architectures (or two runs) side by side, rendered from ``zoo.analysis.diff``."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from .build import RECIPE_HELP, complete_recipe

Side = Annotated[str, typer.Argument(help=RECIPE_HELP, autocompletion=complete_recipe)]


def diff(
    a: Side,
    b: Side,
    batch: Annotated[int, typer.Option("--batch", help="Sequences per batch for the training-memory figure.")] = 1,
    seq: Annotated[
        int | None,
        typer.Option("--seq", help="Tokens per sequence; default the shorter side's train.seq_len, else 4096."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print every difference as one JSON object instead.")] = False,
) -> None:
    """What differs between two architectures: every recipe field, per-layer patterns, and what it costs.

    A and B are recipe files, named recipes, or model, run, checkpoint or Hugging Face folders. Two run folders
    are also compared as runs: how each was started and their last metrics.
    """
    from zoo.analysis.diff import diff as make_diff

    result = make_diff(a, b, batch=batch, seq_len=seq)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    _render(result)


def _render(d: Any) -> None:
    from rich.markup import escape

    from .render import console, table

    show = console()
    show.print(f"A: [bold]{escape(d.a)}[/bold]\nB: [bold]{escape(d.b)}[/bold]")
    if d.same:
        show.print("The architectures are the same: no recipe field differs.")
    else:
        n = len(d.differences)
        t = table(f"{n} field{' differs' if n == 1 else 's differ'}", "section", "field", "A", "B")
        last = None
        for x in d.differences:
            t.add_row(x.section if x.section != last else "", x.field, escape(x.a), escape(x.b))
            last = x.section
        show.print(t)
    if d.costs:
        show.print(_costs(d))
    if d.runs:
        t = table("The runs", "", "what", "A", "B")
        last = None
        for x in d.runs:
            t.add_row(x.section if x.section != last else "", x.field, escape(x.a), escape(x.b))
            last = x.section
        show.print(t)


def _costs(d: Any) -> Any:
    from .render import count, short, size, table

    t = table(f"Costs (batch {d.batch} x {d.seq_len:,} tokens)", "", "A", "B", "B - A", right=("A", "B", "B - A"))
    for c in d.costs:
        shown = {"count": short, "FLOP": lambda n: short(n, "FLOP"), "bytes": size}[c.unit]
        if c.unit == "count" and c.a is not None and c.a < 10**6:
            shown = count
        delta = c.delta
        if delta is None:
            change = "-"
        else:
            sign = "+" if delta > 0 else ("-" if delta < 0 else "")
            change = sign + shown(abs(delta)) if delta else "0"
            if c.a and delta:
                change += f" ({delta / c.a:+.0%})"
        t.add_row(c.name, shown(c.a), shown(c.b), change)
    t.caption = (
        f"training memory: weights, gradients and AdamW state in bf16 mixed precision (16 B per parameter) and "
        f"the activations kept for backward; sequence length: {d.seq_why}"
    )
    t.caption_justify = "left"
    return t


def register(app: typer.Typer) -> None:
    app.command()(diff)
