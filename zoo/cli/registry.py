"""``zoo list``, ``zoo recipes``, ``zoo schema`` and ``zoo plugins``: what is registered and installed."""

from __future__ import annotations

import json
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any

import typer

from zoo.errors import UnknownComponentError, ZooError


def type_name(annotation: Any) -> str:
    """A config field's type as a recipe author reads it: ``int | None``, ``'cls' | 'mean'``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if annotation is type(None):
        return "None"
    if origin is not None:
        return f"{getattr(origin, '__name__', origin)}[{', '.join(type_name(a) for a in args)}]"
    return getattr(annotation, "__name__", str(annotation))


def options(config: Any) -> list[dict[str, Any]]:
    """``{name, type, default, required}`` for each option of a component config (``type`` left out)."""
    from zoo.config import spec_fields

    from .render import plain

    nested = spec_fields(config)
    rows = []
    for name, field in config.model_fields.items():
        if name == "type":
            continue
        kind = f"{nested[name]} spec" if name in nested else type_name(field.annotation)
        required = field.is_required()
        default = None if required else field.default_factory() if field.default_factory else field.default
        rows.append({"name": name, "type": kind, "default": None if required else plain(default), "required": required})
    return rows


def option_lines(config: Any) -> list[str]:
    """``name: type = default`` (or ``name: type (required)``) for each option of a component config."""
    return [
        f"{o['name']}: {o['type']} (required)" if o["required"] else f"{o['name']}: {o['type']} = {o['default']}"
        for o in options(config)
    ]


def plain_doc(text: str) -> str:
    """A docstring line as a listing shows it: reStructuredText markup (````code````, ``:class:`X```,
    ```x```, ``**x**``) taken out, spaces collapsed."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`]+)`", r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    return " ".join(text.split())


JSON_HELP = "Print the listing as JSON instead."
AsJson = Annotated[bool, typer.Option("--json", help=JSON_HELP)]


def echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2))


def list_components(
    kind: Annotated[str | None, typer.Argument(help="Only this kind (attention, ffn, ...).")] = None,
    as_json: AsJson = False,
) -> None:
    """Registered components by kind: name, plugin and version, description, options with types and defaults."""
    from rich.padding import Padding
    from rich.text import Text

    from zoo.plugins import get_registry, plugins
    from zoo.registry import KINDS, did_you_mean

    from .render import console

    if kind is not None and kind not in KINDS:
        raise UnknownComponentError(
            f"unknown component kind {kind!r}{did_you_mean(kind, list(KINDS))}; kinds are: {', '.join(KINDS)}"
        )
    versions = {p.name: p.version for p in plugins()}
    components = [c for c in get_registry() if kind is None or c.kind == kind]
    if as_json:
        echo_json(
            [
                {
                    "kind": c.kind,
                    "name": c.name,
                    "plugin": c.plugin,
                    "version": versions.get(c.plugin),
                    "description": plain_doc(c.description),
                    "options": options(c.config),
                    **({"recipe_fields": _fields(c.config)} if c.kind == "architecture" else {}),
                }
                for c in components
            ]
        )
        return
    # One block per component, not a table: words wrap whole at any width, even 80 columns.
    show = console()
    for k in [kind] if kind else KINDS:
        show.print(f"[bold]{k}[/bold]")
        for c in (c for c in components if c.kind == k):
            plugin = f"{c.plugin} {versions.get(c.plugin) or ''}".strip()
            show.print(Padding(Text.assemble((c.name, "bold cyan"), f"  ({plugin})"), (0, 0, 0, 2)))
            show.print(Padding(Text(plain_doc(c.description)), (0, 0, 0, 4)))
            for line in option_lines(c.config):
                show.print(Padding(Text(line, style="dim" if "(required)" not in line else ""), (0, 0, 0, 6)))
            if c.kind == "architecture":
                show.print(Padding(Text(f"recipe fields: {', '.join(_fields(c.config))}", style="dim"), (0, 0, 0, 6)))
        show.print()


def _fields(config: Any) -> list[str]:
    """The recipe fields an architecture reads (cross-layer sharing, ``layer_groups``, among them)."""
    from zoo.recipe.schema import architecture_fields

    own = ("encoder_embedding",) if getattr(config, "encoder_input", False) else ()  # an encoder's own input
    return architecture_fields(tuple(getattr(config, "unused", ())), (*getattr(config, "towers", ()), *own))


def recipes(as_json: AsJson = False) -> None:
    """Named recipes (shipped and from plugins) with architecture and parameter count (built on meta)."""
    from rich.padding import Padding
    from rich.text import Text

    from zoo.analysis import parameter_breakdown
    from zoo.builder import build
    from zoo.plugins import plugins
    from zoo.recipe import load_recipe, named_recipes

    from .render import aligned, console, count

    shipped_by = {name: p.name for p in plugins() for name in p.recipes}
    rows = []
    for name, path in sorted(named_recipes().items()):
        row: dict[str, Any] = {"name": name, "path": str(path), "plugin": shipped_by.get(name)}
        try:
            recipe = load_recipe(path)
            total = parameter_breakdown(build(recipe, device="meta")).total
            row.update(architecture=recipe.architecture, parameters=total, description=recipe.description)
        except ZooError as exc:
            row.update(architecture=None, parameters=None, error=str(exc).splitlines()[-1].strip())
        rows.append(row)
    if as_json:
        echo_json(rows)
        return
    # Head lines aligned like a table's rows, each description under its recipe at the full width: a description
    # column beside four others would get a few characters at 80 columns.
    show = console()
    show.print("[bold]Named recipes[/bold]\n")
    heads: list[tuple[str | Text, ...]] = [
        tuple(Text(h, style="bold") for h in ("name", "architecture", "parameters", "plugin"))
    ]
    for row in rows:
        parameters = Text("invalid", style="red") if "error" in row else count(row["parameters"])
        name = Text(row["name"], style="bold cyan")
        heads.append((name, row["architecture"] or "-", parameters, row["plugin"] or "-"))
    lines = aligned(heads, right=(2,))
    show.print(lines[0])
    for row, line in zip(rows, lines[1:], strict=True):
        show.print(line)
        description = row["error"] if "error" in row else row.get("description")
        if description:
            show.print(Padding(Text(" ".join(description.split())), (0, 0, 0, 4)))


def schema(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the schema to this file instead of stdout.")
    ] = None,
) -> None:
    """The JSON Schema of recipe files, every registered component included, for editor completion."""
    from zoo.recipe import recipe_json_schema

    text = json.dumps(recipe_json_schema(), indent=2)
    if out is None:
        typer.echo(text)
    else:
        out.write_text(text + "\n", encoding="utf-8")
        typer.echo(f"wrote {out}")


def plugins_command(as_json: AsJson = False) -> None:
    """Installed plugins: version, what each registered by kind, and whether it loaded."""
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    from zoo.plugins import plugins

    from .render import aligned, console

    found = plugins()
    if as_json:
        echo_json(
            [
                {
                    "name": p.name,
                    "version": p.version,
                    "builtin": p.builtin,
                    "status": p.status,
                    "registered": p.registered if p.ok else p.provides,
                    "recipes": list(p.recipes),
                    "hf_families": list(p.hf_families),
                    "accelerators": list(p.accelerators),
                    "error": p.error,
                }
                for p in found
            ]
        )
        return
    # One entry per plugin, what it registered under its line at the full width (not a squeezed column).
    show = console()
    show.print("[bold]Plugins[/bold]\n")
    heads: list[tuple[str | Text, ...]] = [tuple(Text(h, style="bold") for h in ("plugin", "version", "status"))]
    for p in found:
        style = {"ok": "green", "disabled": "yellow"}.get(p.status, "red")
        heads.append((f"{p.name} (built-in)" if p.builtin else p.name, p.version or "-", Text(p.status, style=style)))
    lines = aligned(heads)
    show.print(lines[0])
    for p, line in zip(found, lines[1:], strict=True):
        show.print(line)
        registered = p.registered if p.ok else p.provides
        fields = [(f"{kind}:", ", ".join(names)) for kind, names in registered.items()]
        fields += [("recipes:", ", ".join(p.recipes))] if p.recipes else []
        fields += [("hf families:", ", ".join(p.hf_families))] if p.hf_families else []
        fields += [("accelerators:", ", ".join(p.accelerators))] if p.accelerators else []
        fields += [("error:", p.error)] if p.error else []
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, style="dim")
        grid.add_column(overflow="fold")  # wraps at spaces; folds only a token wider than the line (a path)
        for key, value in fields or [("registered:", "-")]:
            grid.add_row(key, Text(value))
        show.print(Padding(grid, (0, 0, 0, 4)))


def register(app: typer.Typer) -> None:
    app.command("list")(list_components)
    app.command()(recipes)
    app.command()(schema)
    app.command("plugins")(plugins_command)
