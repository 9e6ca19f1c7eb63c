"""Loading recipes: ``load_recipe`` reads a file, a name, a folder, a dict or a ``Recipe``, resolves ``extends``,
applies overrides and validates the result.

The steps live in their own modules: ``reading`` (files, safe YAML and JSON, limits), ``finding`` (named recipes,
paths, folders), ``extends`` (``deep_merge``, ``extends`` chains), ``overrides`` (``--set`` and dotted keys).
Their public names are importable from here too.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from zoo.errors import RecipeError
from zoo.hub import is_hub_id

from .extends import _resolve_extends, deep_merge
from .finding import _folder_recipe, _is_dir, find_recipe, named_recipe, named_recipes
from .overrides import override_path, overrides_to_tree, parse_override
from .reading import RecipeDumper, RecipeLoader, check_tree, dump_yaml, load_json, load_yaml, read_recipe_file
from .report import short_repr as _describe
from .schema import Recipe
from .validation import validate_recipe

__all__ = [
    "RecipeDumper",
    "RecipeLoader",
    "check_tree",
    "deep_merge",
    "dump_yaml",
    "find_recipe",
    "load_json",
    "load_recipe",
    "load_with_assignments",
    "load_yaml",
    "named_recipe",
    "named_recipes",
    "overrides_to_tree",
    "parse_override",
    "read_recipe_file",
]


def load_recipe(source: str | Path | Mapping[str, Any] | Recipe, **overrides: Any) -> Recipe:
    """A validated ``Recipe`` from a file path, a recipe name, a dict, or a ``Recipe`` (copied).

    ``overrides`` apply last, with dotted or double-underscore keys: ``load_recipe("gpt2-small",
    num_layers=2, **{"attention.num_heads": 4})`` or ``attention__num_heads=4``; a number in the path indexes a
    list (``layers.0.ffn.num_experts``). An error in a value one sets names it (``override num_layers=0``).
    """
    origins = {override_path(k): f"override {k}={_describe(v)}" for k, v in overrides.items()}
    return _load(source, overrides, origins)


def load_with_assignments(source: str | Path | Mapping[str, Any] | Recipe, assignments: Sequence[str]) -> Recipe:
    """``load_recipe`` with ``--set KEY.PATH=VALUE`` assignments (``parse_override``); an error in a value one
    sets names that flag (``--set train.lr=abc: train.lr: ...``), an error in the file's values the file."""
    overrides: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for assignment in assignments:
        key, value = parse_override(assignment)
        overrides[key] = value
        origins[override_path(key)] = f"--set {assignment.strip()}"
    return _load(source, overrides, origins)


def _load(
    source: str | Path | Mapping[str, Any] | Recipe, overrides: Mapping[str, Any], origins: Mapping[str, str]
) -> Recipe:
    path: Path | None = None
    if isinstance(source, Recipe):
        data = source.to_dict()
    elif isinstance(source, Mapping):
        check_tree(source)
        data = copy.deepcopy(dict(source))
    elif isinstance(source, (str, Path)) and (_is_dir(Path(source)) or is_hub_id(source)):
        path, data = _folder_recipe(Path(source))
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
        check_tree(overrides)
        try:
            tree = overrides_to_tree(overrides)
            if "expect" not in tree:
                data.pop("expect", None)  # the expected size was of the recipe as written, not as overridden
            data = deep_merge(data, tree)
        except RecipeError as exc:  # a path the recipe does not have: the override's fault
            raise RecipeError(exc.errors, origins=_blamed(exc, origins)) from None
    return validate_recipe(data, source=label, origins=origins)


def _blamed(exc: RecipeError, origins: Mapping[str, str]) -> dict[str, str]:
    """Each error path of ``exc`` with the override through which it was reached, as ``RecipeError``'s origins."""
    return {
        path: flag
        for path, _ in exc.errors
        for key, flag in origins.items()
        if key == path or key.startswith(f"{path}.")
    }
