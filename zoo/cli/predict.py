"""``zoo predict``: the labels a classifier, masked LM or ViT gives its inputs, rendered from ``zoo.predict``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def predict(
    model: Annotated[
        Path,
        typer.Argument(
            metavar="MODEL",
            help="A run folder (zoo train --out), one of its checkpoints, a zoo model folder or a Hugging Face folder.",
        ),
    ],
    inputs: Annotated[
        list[str],
        typer.Argument(
            metavar="INPUT",
            help="Texts for a text classifier; texts with [MASK] where a masked LM is to fill in a token; image "
            "files for a ViT.",
        ),
    ],
    top_k: Annotated[
        int | None, typer.Option("--top-k", help="Labels per input (default 5, at most the number of labels).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the predictions as JSON.")] = False,
) -> None:
    """Label texts or images with a trained classifier, masked LM or ViT: top-k labels with probabilities."""
    from rich.markup import escape

    from zoo.predict import predict as run_predict

    from .render import console, table

    result = run_predict(model, inputs, top_k=top_k)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return
    show = console()
    for note in result.notes:
        show.print(f"[dim]note:[/dim] {escape(note)}")
    for p in result.predictions:
        which = "" if p.mask is None else f"  [dim](mask {p.mask + 1})[/dim]"
        show.print(f"[bold]{escape(p.input)}[/bold]{which}")
        t = table(None, "label", "probability", right=("probability",))
        for c in p.candidates:  # a token is shown quoted: its spaces are part of it
            t.add_row(escape(repr(c.label) if result.task == "fill-mask" else c.label), f"{c.probability:.4f}")
        show.print(t)
        if p.truncated:
            show.print("  [dim]note:[/dim] the text is longer than the model's positions: its end was left out")


def register(app: typer.Typer) -> None:
    app.command()(predict)
