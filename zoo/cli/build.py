"""``zoo build`` and ``zoo validate``: turn recipes into models, or check them without building."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from zoo.dtypes import DTYPE_CHOICES
from zoo.errors import ZooError

RECIPE_HELP = (
    "A recipe file (YAML or JSON), the name of a named recipe (see `zoo recipes`), or a model, run, checkpoint "
    "or Hugging Face folder (its recipe)."
)


def complete_recipe(incomplete: str) -> list[str]:
    """Shell completion of a recipe argument: the named recipes, then recipe files and folders, that start with
    what was typed."""
    from zoo.recipe import named_recipes

    names = [n for n in sorted(named_recipes()) if n.startswith(incomplete)]
    folder, _, stem = incomplete.rpartition("/")
    base = Path(folder or ".")
    try:
        entries = sorted(base.iterdir()) if base.is_dir() else []
    except OSError:
        entries = []
    paths = [
        f"{folder + '/' if folder else ''}{p.name}{'/' if p.is_dir() else ''}"
        for p in entries
        if p.name.startswith(stem) and not p.name.startswith(".") and (p.is_dir() or p.suffix in RECIPE_SUFFIXES)
    ]
    return names + paths


RECIPE_SUFFIXES = (".yaml", ".yml", ".json")
RecipeArg = Annotated[str, typer.Argument(help=RECIPE_HELP, autocompletion=complete_recipe)]
SET_HELP = "Override a recipe value, e.g. --set attention.num_heads=8 (the value is read as YAML); repeatable."
Overrides = Annotated[list[str] | None, typer.Option("--set", metavar="KEY.PATH=VALUE", help=SET_HELP)]


class Device(str, Enum):
    cpu = "cpu"
    cuda = "cuda"
    meta = "meta"


Dtype = Enum("Dtype", {name: name for name in DTYPE_CHOICES}, type=str)
"""The ``--dtype`` choices: the dtypes of ``zoo.dtypes``' table that a model is built in."""


def load_with_overrides(recipe: str, assignments: list[str] | None) -> Any:
    """The validated recipe ``recipe`` with ``--set`` assignments applied; an error in a value one sets names
    that flag."""
    from zoo.recipe import load_with_assignments

    return load_with_assignments(recipe, assignments or [])


def build(
    recipe: RecipeArg,
    set_: Overrides = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Save the resolved recipe (recipe.yaml) and the weights (model.safetensors) here."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="--out holds another model or other files: replace that folder whole.")
    ] = False,
    device: Annotated[Device, typer.Option("--device", help="Where to build; meta allocates nothing.")] = Device.cpu,
    dtype: Annotated[Dtype, typer.Option("--dtype", help="Parameter dtype.")] = Dtype.float32,
    as_json: Annotated[bool, typer.Option("--json", help="Print the component tree as JSON instead.")] = False,
) -> None:
    """Validate and build a recipe; print its component tree (kind, name, plugin, parameters)."""
    import torch

    from zoo.analysis import component_tree
    from zoo.builder import build
    from zoo.checkpoint import holds_recipe, save
    from zoo.files import destination

    from .render import console, count

    resolved = load_with_overrides(recipe, set_)
    if out is not None and device is Device.meta:
        raise ZooError("--out saves weights, and a model built on the meta device has none: use --device cpu or cuda")
    if device is Device.cuda and not torch.cuda.is_available():
        raise ZooError("--device cuda: CUDA is not available on this machine (torch sees no GPU)")
    model = build(resolved, device=device.value, dtype=dtype.value)
    tree = component_tree(model)
    directory = None
    if out is not None:
        with destination(out, what="the built model", force=force, same=holds_recipe(model.recipe)):
            directory = save(model, out)
    if as_json:
        data = {"recipe": resolved.name, "device": device.value, "dtype": dtype.value, "parameters": tree.params}
        typer.echo(json.dumps({**data, "tree": _tree_data(tree), "saved": str(directory) if directory else None}))
        return
    show = console()
    show.print(_tree(tree, resolved.name))
    show.print(f"{count(tree.params)} parameters (tied weights counted once) on {device.value}, {dtype.value}")
    if directory is not None:
        show.print(f"saved {directory / 'recipe.yaml'} and {directory / 'model.safetensors'}")


def _tree_data(node: Any) -> dict[str, Any]:
    return {
        "name": node.name,
        "module": node.module,
        "kind": node.kind,
        "component": node.component,
        "plugin": node.plugin,
        "params": node.params,
        "repeat": node.repeat,
        "tied": list(node.tied),
        "children": [_tree_data(child) for child in node.children],
    }


def _label(node: Any, name: str) -> Any:
    from rich.text import Text

    from .render import count

    label = Text(name, style="bold")
    if node.repeat > 1:
        label.append(f" ×{node.repeat}")
    label.append(f"  {node.module}", style="dim" if node.kind is None else "")
    if node.kind is not None:
        label.append(f"  {node.kind}: ", style="cyan")
        label.append(node.component or "", style="bold cyan")
        label.append(f" ({node.plugin})", style="dim")
    label.append(f"  {count(node.params)}" + (" each" if node.repeat > 1 else ""), style="green")
    if node.tied:
        label.append(f"  tied: {', '.join(node.tied)}", style="yellow")
    return label


def _tree(root: Any, title: str) -> Any:
    from rich.tree import Tree

    tree = Tree(_label(root, title))

    def add(parent: Any, node: Any) -> None:
        for child in node.children:
            add(parent.add(_label(child, child.name)), child)

    add(tree, root)
    return tree


def validate(
    recipes: Annotated[
        list[str], typer.Argument(help="Recipe files, names or model folders to check.", autocompletion=complete_recipe)
    ],
    set_: Overrides = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per recipe instead.")] = False,
) -> None:
    """Validate recipes with every check `zoo build` makes (built on the meta device: no memory); report every
    error; exit 2 if any is invalid. --set applies to each recipe."""
    from rich.markup import escape

    from zoo.builder import check_buildable

    from . import format_error
    from .render import console

    show = console()
    results = []
    for ref in recipes:
        try:
            resolved = check_buildable(load_with_overrides(ref, set_))
        except ZooError as exc:
            results.append({"recipe": ref, "ok": False, "error": format_error(exc)})
            if not as_json:
                show.print(f"[red]invalid[/red] {escape(ref)}")
                show.print(format_error(exc), markup=False, soft_wrap=True)
        else:
            results.append({"recipe": ref, "ok": True, "name": resolved.name, "architecture": resolved.architecture})
            if not as_json:
                show.print(f"[green]ok[/green] {escape(ref)}: {escape(resolved.name)} ({resolved.architecture})")
    if as_json:
        typer.echo(json.dumps(results, indent=2))
    invalid = sum(not r["ok"] for r in results)
    if invalid:
        if as_json:
            raise typer.Exit(EXIT_INVALID)
        raise ZooError(f"{invalid} of {len(recipes)} recipes are invalid")


EXIT_INVALID = 2


def register(app: typer.Typer) -> None:
    app.command()(build)
    app.command()(validate)
