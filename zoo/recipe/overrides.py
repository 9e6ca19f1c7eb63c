"""Overrides: ``--set KEY.PATH=VALUE`` assignments (the value read as YAML) and dotted keys made into the nested
tree that ``deep_merge`` lays over a recipe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from zoo.errors import RecipeError

from .reading import _Refused, load_yaml


def parse_override(assignment: str) -> tuple[str, Any]:
    """``'attention.num_heads=8'`` -> ``('attention.num_heads', 8)``; the value is read as YAML."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key.strip():
        raise RecipeError(f"--set {assignment!r}: expected KEY.PATH=VALUE, e.g. attention.num_heads=8")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except _Refused as exc:
        raise RecipeError(f"--set {key.strip()}: {exc.problem}") from None
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
