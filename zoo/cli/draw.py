"""``zoo draw``: a recipe's architecture as a block diagram (SVG or PNG), drawn by ``zoo.draw``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .build import Overrides, RecipeArg, load_with_overrides


def draw(
    recipe: RecipeArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="The picture: a .svg or .png file.")],
    set_: Overrides = None,
    dpi: Annotated[int, typer.Option("--dpi", help="Resolution of a PNG, 10 to 1200.")] = 150,
) -> None:
    """Draw a recipe's architecture: embedding, one block of each kind with its widths, × N, final norm, head."""
    from rich.markup import escape

    from zoo.draw import draw as draw_recipe

    from .render import console

    path = draw_recipe(load_with_overrides(recipe, set_), out, dpi=dpi)
    console().print(f"wrote {escape(str(path))}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(draw)
