"""Overrides: ``--set KEY.PATH=VALUE`` assignments (the value read as YAML) and dotted keys made into the nested
tree that ``deep_merge`` lays over a recipe (a number in the path indexes a list: ``layers.0.ffn.num_experts``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from zoo.errors import RecipeError

from .extends import OverrideTree
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


def override_path(key: str) -> str:
    """The dotted path an override key sets: ``attention__num_heads`` -> ``attention.num_heads``."""
    return key.replace("__", ".")


def overrides_to_tree(overrides: Mapping[str, Any]) -> OverrideTree:
    """Dotted (or ``__``-separated) keys into a nested ``OverrideTree`` ready for ``deep_merge``."""
    tree = OverrideTree()
    for dotted, value in overrides.items():
        keys = override_path(dotted).split(".")
        node = tree
        for k in keys[:-1]:
            node = node.setdefault(k, OverrideTree())
            if not isinstance(node, dict):
                raise RecipeError(f"override {dotted!r} conflicts with another override of {k!r}")
        node[keys[-1]] = value
    return tree
