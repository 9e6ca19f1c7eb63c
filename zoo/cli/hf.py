"""``zoo import`` and ``zoo export``: Hugging Face checkpoints in and out, through ``zoo.hf``.

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


FORCE_HELP = "Replace an output folder that holds something else, whole (without it, such a folder is refused)."
Force = Annotated[bool, typer.Option("--force", help=FORCE_HELP)]


def import_(
    hf_dir: Annotated[
        Path,
        typer.Argument(help="Hugging Face checkpoint folder (config.json and the weights), or a hub id (owner/name)."),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Folder to write recipe.yaml and model.safetensors to; default models/NAME."),
    ] = None,
    dtype: Annotated[Dtype | None, typer.Option("--dtype", help="Cast the weights; default: as stored.")] = None,
    force: Force = False,
    weights: Annotated[
        Path | None,
        typer.Option("--weights", help="timm:NAME: a timm checkpoint file to load (default: cached or random)."),
    ] = None,
) -> None:
    """Import a Hugging Face checkpoint (a folder, or a hub id read from the local hub cache) as a zoo model folder;
    or timm:NAME, timm's vision transformer NAME (pip install timm)."""
    from zoo.errors import ArgumentError
    from zoo.hf import import_checkpoint

    from .render import console, count

    if str(hf_dir).startswith("timm:"):
        from zoo.timm_import import import_timm

        if dtype is not None:
            raise ArgumentError("--dtype casts a Hugging Face checkpoint; timm:NAME imports as timm builds it")
        name = str(hf_dir).removeprefix("timm:")
        folder = out if out is not None else Path("models") / name.replace("/", "-")
        directory, parameters, said = import_timm(name, folder, weights=weights, force=force)
        console().print(
            f"[green]Imported[/green] timm's [bold]{name}[/bold] ({count(parameters)} parameters, {said}) "
            f"-> {directory}"
        )
        return
    if weights is not None:
        raise ArgumentError("--weights is for timm:NAME; a Hugging Face folder holds its own weights")

    out = out if out is not None else Path("models") / hf_dir.resolve().name
    done = import_checkpoint(hf_dir, out, dtype=dtype.value if dtype is not None else None, force=force)
    console().print(
        f"[green]Imported[/green] {done.hf_class} ([bold]{done.family}[/bold], {count(done.parameters)} parameters) "
        f"from {hf_dir} -> {done.directory}"
    )
    _notes(done.notes)


def export(
    directory: Annotated[
        Path,
        typer.Argument(help="A zoo model folder, a run folder (zoo train --out) or one of its checkpoint folders."),
    ],
    out: Annotated[Path | None, typer.Argument(help="Folder to write the checkpoint to (or --out).")] = None,
    out_option: Annotated[Path | None, typer.Option("--out", "-o", help="Folder to write the checkpoint to.")] = None,
    to: Annotated[ExportFormat, typer.Option("--to", help="Checkpoint format (hf, the only one).")] = ExportFormat.hf,
    remote_code: Annotated[
        bool,
        typer.Option(
            "--remote-code",
            help="Write the generated modeling file for trust_remote_code even when a Hugging Face family fits.",
        ),
    ] = False,
    force: Force = False,
    merge_lora: Annotated[
        bool,
        typer.Option(
            "--merge-lora",
            help="A LoRA run: fold the adapters into the weights (W + alpha/rank B A). Without it, the base weights "
            "export and the adapters go to OUT/adapter as a PEFT folder.",
        ),
    ] = False,
) -> None:
    """Export a model as a Hugging Face checkpoint that transformers.pipeline loads.

    Writes config.json and model.safetensors, and the tokenizer (tokenizer.json, tokenizer_config.json)
    and generation_config.json: a run's own tokenizer, or the files an imported checkpoint came with.
    A model that fits no Hugging Face family (or any, with --remote-code) gets a generated modeling_zoo.py
    and its torch.export programs: load it with trust_remote_code=True.
    A LoRA run's adapters: merged (--merge-lora), or in OUT/adapter for peft.PeftModel.from_pretrained.
    """
    from zoo.errors import ArgumentError
    from zoo.hf import export_checkpoint

    from .render import console, count

    if (out is None) == (out_option is None):
        raise ArgumentError("give the folder to write to once: zoo export MODEL OUT, or zoo export MODEL --out OUT")
    done = export_checkpoint(directory, out or out_option, force=force, remote_code=remote_code, merge_lora=merge_lora)
    console().print(
        f"[green]Exported[/green] {directory} as {done.hf_class} ([bold]{done.family}[/bold], "
        f"{count(done.parameters)} parameters) -> {done.directory}"
    )
    _notes(done.notes)


def _notes(notes: tuple[str, ...]) -> None:
    from rich.markup import escape

    from .render import console

    for note in notes:
        console().print(f"  [dim]note:[/dim] {escape(note)}")


def register(app: typer.Typer) -> None:
    """Add the ``import`` and ``export`` commands to the ``zoo`` app."""
    app.command("import")(import_)
    app.command("export")(export)
