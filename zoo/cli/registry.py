"""``zoo list``, ``zoo recipes``, ``zoo schema`` and ``zoo plugins``: what is registered and installed."""

from __future__ import annotations

import json
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


def option_lines(config: Any) -> list[str]:
    """``name: type = default`` for each option of a component config (``type`` left out)."""
    from zoo.config import spec_fields

    from .render import plain

    nested = spec_fields(config)
    lines = []
    for name, field in config.model_fields.items():
        if name == "type":
            continue
        kind = f"{nested[name]} spec" if name in nested else type_name(field.annotation)
        if field.is_required():
            default = "required"
        elif field.default_factory is not None:
            default = plain(field.default_factory())
        else:
            default = plain(field.default)
        lines.append(f"{name}: {kind} = {default}" if default != "required" else f"{name}: {kind} (required)")
    return lines


def list_components(
    kind: Annotated[str | None, typer.Argument(help="Only this kind (attention, ffn, ...).")] = None,
) -> None:
    """Registered components by kind: name, plugin and version, description, options with types and defaults."""
    from rich.markup import escape

    from zoo.plugins import get_registry, plugins
    from zoo.registry import KINDS, did_you_mean

    from .render import console, table

    if kind is not None and kind not in KINDS:
        raise UnknownComponentError(
            f"unknown component kind {kind!r}{did_you_mean(kind, list(KINDS))}; kinds are: {', '.join(KINDS)}"
        )
    versions = {p.name: p.version for p in plugins()}
    registry = get_registry()
    show = console()
    for k in [kind] if kind else KINDS:
        t = table(k, "name", "plugin", "description", "options", whole=("name", "plugin", "options"))
        for c in (c for c in registry if c.kind == k):
            plugin = f"{c.plugin} {versions.get(c.plugin) or ''}".strip()
            t.add_row(c.name, escape(plugin), escape(c.description), escape("\n".join(option_lines(c.config))))
        show.print(t)


def recipes() -> None:
    """Named recipes (shipped and from plugins) with architecture and parameter count (built on meta)."""
    from rich.markup import escape

    from zoo.analysis import parameter_breakdown
    from zoo.builder import build
    from zoo.plugins import plugins
    from zoo.recipe import load_recipe, named_recipes

    from .render import console, count, table

    shipped_by = {name: p.name for p in plugins() for name in p.recipes}
    t = table("Named recipes", "name", "architecture", "parameters", "plugin", "description", right=("parameters",))
    for name, path in sorted(named_recipes().items()):
        try:
            recipe = load_recipe(path)
            parameters = count(parameter_breakdown(build(recipe, device="meta")).total)
            architecture, description = recipe.architecture, recipe.description
        except ZooError as exc:
            architecture, parameters = "-", "[red]invalid[/red]"
            description = str(exc).splitlines()[-1].strip()
        t.add_row(name, architecture, parameters, escape(shipped_by.get(name, "-")), escape(description))
    console().print(t)


def schema(
    out: Annotated[Path | None, typer.Option("--out", help="Write the schema to this file instead of stdout.")] = None,
) -> None:
    """The JSON Schema of recipe files, every registered component included, for editor completion."""
    from zoo.recipe import recipe_json_schema

    text = json.dumps(recipe_json_schema(), indent=2)
    if out is None:
        typer.echo(text)
    else:
        out.write_text(text + "\n", encoding="utf-8")
        typer.echo(f"wrote {out}")


def plugins_command() -> None:
    """Installed plugins: version, what each registered by kind, and whether it loaded."""
    from rich.markup import escape

    from zoo.plugins import plugins

    from .render import console, table

    t = table("Plugins", "plugin", "version", "status", "registered", whole=("plugin", "version", "status"))
    for p in plugins():
        registered = p.registered if p.ok else p.provides
        lines = [f"{kind}: {', '.join(names)}" for kind, names in registered.items()]
        lines += [f"recipes: {', '.join(p.recipes)}"] if p.recipes else []
        lines += [f"error: {p.error}"] if p.error else []
        style = {"ok": "green", "disabled": "yellow"}.get(p.status, "red")
        name = f"{p.name} (built-in)" if p.builtin else p.name
        t.add_row(escape(name), p.version or "-", f"[{style}]{p.status}[/{style}]", escape("\n".join(lines) or "-"))
    console().print(t)


def register(app: typer.Typer) -> None:
    app.command("list")(list_components)
    app.command()(recipes)
    app.command()(schema)
    app.command("plugins")(plugins_command)
