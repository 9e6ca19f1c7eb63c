"""``zoo predict``: the labels a classifier, masked LM or ViT gives its inputs, rendered from ``zoo.predict``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

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
            "files or folders for a ViT or, with --labels, a dual-encoder.",
        ),
    ],
    top_k: Annotated[
        int | None, typer.Option("--top-k", help="Labels per input (default 5, at most the number of labels).")
    ] = None,
    labels: Annotated[
        str | None,
        typer.Option("--labels", help="A dual-encoder (CLIP): the candidate labels of the images, comma-separated."),
    ] = None,
    template: Annotated[
        str | None,
        typer.Option("--template", help="--labels: the caption of a label, {} where it goes (a photo of a {})."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the predictions as JSON.")] = False,
    embed: Annotated[
        bool,
        typer.Option("--embed", help="A vector per text instead of labels: the last hidden states, pooled."),
    ] = False,
    pooling: Annotated[
        str | None,
        typer.Option(
            "--pooling", help="--embed: mean, cls or last (default: the folder's sentence-transformers config)."
        ),
    ] = None,
    normalize: Annotated[
        bool | None,
        typer.Option("--normalize/--no-normalize", help="--embed: unit length (default: as the folder says)."),
    ] = None,
) -> None:
    """Label texts or images with a trained classifier, masked LM, ViT or (zero-shot, --labels) dual-encoder: top-k
    labels with probabilities; or, with --embed, a sentence encoder's vector of each text."""
    from rich.markup import escape

    from zoo.predict import predict as run_predict

    from .render import table

    if embed:
        _embed(model, inputs, pooling, normalize, as_json)
        return
    names = None if labels is None else labels.split(",")
    result = run_predict(model, inputs, top_k=top_k, labels=names, template=template)
    show = _json_or_notes(result, as_json)
    if show is None:
        return
    for p in result.predictions:
        which = "" if p.mask is None else f"  [dim](mask {p.mask + 1})[/dim]"
        show.print(f"[bold]{escape(p.input)}[/bold]{which}")
        t = table(None, "label", "probability", right=("probability",))
        for c in p.candidates:  # a token is shown quoted: its spaces are part of it
            t.add_row(escape(repr(c.label) if result.task == "fill-mask" else c.label), f"{c.probability:.4f}")
        show.print(t)
        if p.truncated:
            show.print("  [dim]note:[/dim] the text is longer than the model's positions: its end was left out")


def _json_or_notes(result: Any, as_json: bool) -> Any:
    """Print ``result`` as JSON (then None), or its notes, and return the console for the rest."""
    from rich.markup import escape

    from .render import console

    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return None
    show = console()
    for note in result.notes:
        show.print(f"[dim]note:[/dim] {escape(note)}")
    return show


def _embed(model: Path, inputs: list[str], pooling: str | None, normalize: bool | None, as_json: bool) -> None:
    from rich.markup import escape

    from zoo.predict import embed

    result = embed(model, inputs, pooling=pooling, normalize=normalize)
    show = _json_or_notes(result, as_json)
    if show is None:
        return
    scaled = ", unit length" if result.normalized else ""
    for item, vector in zip(result.inputs, result.vectors, strict=True):
        norm = sum(x * x for x in vector) ** 0.5
        head = ", ".join(f"{x:.4f}" for x in vector[:6])
        show.print(f"[bold]{escape(item)}[/bold]  [dim]({len(vector)} dims, {result.pooling} pooling{scaled})[/dim]")
        show.print(f"  [{head}, ...]  norm {norm:.4f}")


def register(app: typer.Typer) -> None:
    app.command()(predict)
