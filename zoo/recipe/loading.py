"""Reading recipes: files (safe YAML or JSON), names, ``extends`` chains, ``--set`` overrides."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from zoo.errors import RecipeError
from zoo.plugins import recipe_paths
from zoo.registry import did_you_mean

from .schema import Recipe
from .validation import validate_recipe


def read_recipe_file(path: Path) -> dict[str, Any]:
    """Parse one YAML or JSON file into a dict; syntax errors name the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecipeError(f"cannot read recipe: {exc.strerror or exc}", source=str(path)) from None
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise RecipeError(f"line {exc.lineno}, column {exc.colno}: {exc.msg}", source=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise RecipeError(f"{where}invalid YAML: {problem}", source=str(path)) from None
    if data is None:
        raise RecipeError("the recipe file is empty", source=str(path))
    if not isinstance(data, dict):
        raise RecipeError(
            f"a recipe must be a mapping of keys to values, not a {type(data).__name__}", source=str(path)
        )
    return data


def named_recipes() -> dict[str, Path]:
    """Recipe name -> file, from every recipe directory that plugins ship (the built-in one included)."""
    found: dict[str, Path] = {}
    for base in recipe_paths():
        files = [base] if base.is_file() else sorted(base.glob("*.y*ml")) + sorted(base.glob("*.json"))
        for f in files:
            found.setdefault(f.stem, f)
    return found


def find_recipe(ref: str, relative_to: Path | None = None) -> Path:
    """A recipe file from a path (relative to ``relative_to`` first) or a recipe name."""
    candidates = [Path(ref)]
    if relative_to is not None:
        candidates.insert(0, relative_to / ref)
    for c in candidates:
        if c.is_file():
            return c
    named = named_recipes()
    if ref in named:
        return named[ref]
    hint = did_you_mean(ref, sorted(named))
    raise RecipeError(
        f"no recipe file or named recipe {ref!r}{hint}; named recipes: {', '.join(sorted(named)) or 'none'}"
    )


def deep_merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``: mappings merge key by key, anything else is replaced.

    A component spec whose ``type`` changes is replaced whole: the old type's options would not fit.
    """
    out = copy.deepcopy(base)
    for key, value in top.items():
        old = out.get(key)
        if (
            isinstance(old, dict)
            and isinstance(value, Mapping)
            and old.get("type", value.get("type")) == value.get("type", old.get("type"))
        ):
            out[key] = deep_merge(old, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _resolve_extends(data: dict[str, Any], path: Path | None, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    parent_ref = data.pop("extends", None)
    if parent_ref is None:
        return data
    if not isinstance(parent_ref, str):
        raise RecipeError(f"extends: must be a recipe name or path, not {parent_ref!r}", source=str(path or ""))
    parent_path = find_recipe(parent_ref, path.parent if path else None)
    key = str(parent_path.resolve())
    if key in seen:
        raise RecipeError(f"extends: cycle through {parent_ref!r}", source=str(path or parent_path))
    parent = _resolve_extends(read_recipe_file(parent_path), parent_path, (*seen, key))
    parent.pop("expect", None)  # a parent's expected size is a fact about the parent, not the child
    return deep_merge(parent, data)


def parse_override(assignment: str) -> tuple[str, Any]:
    """``'attention.num_heads=8'`` -> ``('attention.num_heads', 8)``; the value is read as YAML."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise RecipeError(f"--set {assignment!r}: expected KEY.PATH=VALUE, e.g. attention.num_heads=8")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def overrides_to_tree(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted (or ``__``-separated) keys into a nested dict ready for ``deep_merge``."""
    tree: dict[str, Any] = {}
    for dotted, value in overrides.items():
        keys = dotted.replace("__", ".").split(".")
        node = tree
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise RecipeError(f"override {dotted!r} conflicts with another override of {k!r}")
        node[keys[-1]] = value
    return tree


def load_recipe(source: str | Path | Mapping[str, Any] | Recipe, **overrides: Any) -> Recipe:
    """A validated ``Recipe`` from a file path, a recipe name, a dict, or a ``Recipe`` (copied).

    ``overrides`` apply last, with dotted or double-underscore keys: ``load_recipe("gpt2-small",
    num_layers=2, **{"attention.num_heads": 4})`` or ``attention__num_heads=4``.
    """
    path: Path | None = None
    if isinstance(source, Recipe):
        data = source.to_dict()
    elif isinstance(source, Mapping):
        data = copy.deepcopy(dict(source))
    elif isinstance(source, (str, Path)):
        path = find_recipe(str(source))
        data = read_recipe_file(path)
    else:
        raise RecipeError(f"cannot load a recipe from a {type(source).__name__}; give a path, a name or a dict")
    label = str(path) if path else None
    try:
        data = _resolve_extends(data, path)
    except RecipeError as exc:
        exc.source = exc.source or label
        raise
    if overrides:
        tree = overrides_to_tree(overrides)
        if "expect" not in tree:
            data.pop("expect", None)  # the expected size was of the recipe as written, not as overridden
        data = deep_merge(data, tree)
    return validate_recipe(data, source=label)
