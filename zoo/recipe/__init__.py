"""Recipes: YAML/JSON files that name components and sizes, validated before any tensor exists.

Loading order: read the file (safe YAML) -> resolve ``extends`` (deep merge) -> apply overrides ->
validate every component spec against the config its component registered -> validate the recipe ->
check the rules that span components. Every problem found is collected into one ``RecipeError``.

``schema`` holds the models; ``loading`` loads a recipe, from ``reading`` (files, safe YAML and JSON), ``finding``
(named recipes, paths, folders), ``extends`` (merging, ``extends`` chains) and ``overrides`` (``--set``);
``validation`` validates one, from ``specs`` (component specs), ``partial`` (what validated of a part that
failed, for the rules), ``rules`` (the rules that span components) and ``report`` (the errors' wording);
``json_schema`` is the schema for editors; every limit on what a recipe may ask for is in ``zoo.limits``
(``limits`` here names them too). No module here imports torch.
"""

from __future__ import annotations

from . import limits
from .json_schema import ARCHITECTURE_DEFAULTS, recipe_json_schema
from .loading import (
    RecipeLoader,
    check_tree,
    deep_merge,
    dump_yaml,
    find_recipe,
    load_recipe,
    load_with_assignments,
    load_yaml,
    named_recipes,
    overrides_to_tree,
    parse_override,
    read_recipe_file,
)
from .schema import (
    COMPONENT_FIELDS,
    LAYER_FIELDS,
    Component,
    Expect,
    LayerOverride,
    Recipe,
    layer_selection,
    position_limit,
    positions_fit,
    select_layers,
)
from .validation import check_rules, validate_recipe, validate_spec

__all__ = [
    "ARCHITECTURE_DEFAULTS",
    "COMPONENT_FIELDS",
    "LAYER_FIELDS",
    "Component",
    "Expect",
    "LayerOverride",
    "Recipe",
    "RecipeLoader",
    "check_rules",
    "check_tree",
    "deep_merge",
    "dump_yaml",
    "find_recipe",
    "layer_selection",
    "limits",
    "load_recipe",
    "load_with_assignments",
    "load_yaml",
    "named_recipes",
    "overrides_to_tree",
    "parse_override",
    "position_limit",
    "positions_fit",
    "read_recipe_file",
    "recipe_json_schema",
    "select_layers",
    "validate_recipe",
    "validate_spec",
]
