"""``zoo import`` and ``zoo export --to hf``: Hugging Face checkpoints in and out, through ``zoo.hf``.

Errors (``HFImportError``, ``HFExportError``, ``RecipeError``) propagate to the app's one error handler.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from .build import Dtype


class ExportFormat(str, Enum):
    hf = "hf"


def import_(
    hf_dir: Annotated[Path, typer.Argument(help="Hugging Face checkpoint folder: config.json and the weights.")],
    out: Annotated[Path, typer.Option("--out", help="Folder to write recipe.yaml and model.safetensors to.")],
    dtype: Annotated[Dtype | None, typer.Option("--dtype", help="Cast the weights; default: as stored.")] = None,
) -> None:
    """Import a local Hugging Face checkpoint (GPT-2, BERT, ViT, T5, Llama, Mixtral) as a zoo model folder."""
    from zoo.hf import import_checkpoint

    from .render import console, count

    done = import_checkpoint(hf_dir, out, dtype=dtype.value if dtype is not None else None)
    console().print(
        f"[green]Imported[/green] {done.hf_class} ([bold]{done.family}[/bold], {count(done.parameters)} parameters) "
        f"from {hf_dir} -> {done.directory}"
    )


def export(
    directory: Annotated[Path, typer.Argument(help="A zoo model folder (recipe.yaml + model.safetensors).")],
    out: Annotated[Path, typer.Argument(help="Folder to write the checkpoint to.")],
    to: Annotated[ExportFormat, typer.Option("--to", help="Checkpoint format.")],
) -> None:
    """Export a zoo model folder as a Hugging Face checkpoint (config.json + model.safetensors)."""
    from zoo.hf import export_checkpoint

    from .render import console, count

    done = export_checkpoint(directory, out)
    console().print(
        f"[green]Exported[/green] {directory} as {done.hf_class} ([bold]{done.family}[/bold], "
        f"{count(done.parameters)} parameters) -> {done.directory}"
    )


def register(app: typer.Typer) -> None:
    """Add the ``import`` and ``export`` commands to the ``zoo`` app."""
    app.command("import")(import_)
    app.command("export")(export)
