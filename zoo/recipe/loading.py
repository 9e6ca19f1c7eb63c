"""Loading recipes: ``load_recipe`` reads a file, a name, a folder, a dict or a ``Recipe``, resolves ``extends``,
applies overrides and validates the result.

The steps live in their own modules: ``reading`` (files, safe YAML and JSON, limits), ``finding`` (named recipes,
paths, folders), ``extends`` (``deep_merge``, ``extends`` chains), ``overrides`` (``--set`` and dotted keys).
Their public names are importable from here too.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zoo.errors import RecipeError

from .extends import _resolve_extends, deep_merge
from .finding import _folder_recipe, _is_dir, find_recipe, named_recipe, named_recipes
from .overrides import overrides_to_tree, parse_override
from .reading import RecipeDumper, RecipeLoader, check_tree, dump_yaml, load_json, load_yaml, read_recipe_file
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
    num_layers=2, **{"attention.num_heads": 4})`` or ``attention__num_heads=4``.
    """
    path: Path | None = None
    if isinstance(source, Recipe):
        data = source.to_dict()
    elif isinstance(source, Mapping):
        check_tree(source)
        data = copy.deepcopy(dict(source))
    elif isinstance(source, (str, Path)) and _is_dir(Path(source)):
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
        tree = overrides_to_tree(overrides)
        if "expect" not in tree:
            data.pop("expect", None)  # the expected size was of the recipe as written, not as overridden
        data = deep_merge(data, tree)
    return validate_recipe(data, source=label)
