"""Merging recipes: ``deep_merge`` (a component spec whose ``type`` changes keeps only the options the new type
accepts), and ``extends`` chains resolved by merging a recipe over its parents.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zoo.errors import RecipeError, RecipeWarning
from zoo.limits import MAX_EXTENDS

from .finding import find_recipe
from .reading import read_recipe_file
from .report import short_repr as _describe


class OverrideTree(dict[str, Any]):
    """A tree of overrides (``overrides_to_tree``): laid over a list by ``deep_merge``, its keys are indices
    (``layers.0.ffn.num_experts=3`` sets that option of the first per-layer override)."""


def deep_merge(base: dict[str, Any], top: Mapping[str, Any], *, where: str = "") -> dict[str, Any]:
    """``top`` over ``base``: mappings merge key by key, anything else is replaced; an ``OverrideTree`` over a
    list (or where there is none, with only indices for keys) merges into its entries by index.

    A component spec whose ``type`` changes keeps the options the new type accepts too (``--set
    attention.type=gqa`` keeps ``num_heads``); the others are dropped, and a ``RecipeWarning`` names them.
    """
    out = copy.deepcopy(base)
    for key, value in top.items():
        old = out.get(key)
        path = f"{where}{key}"
        if isinstance(value, OverrideTree) and (
            isinstance(old, list) or (old is None and value and all(_is_index(k) for k in value))
        ):
            out[key] = _merge_entries(old or [], value, path)
        elif isinstance(old, dict) and isinstance(value, Mapping):
            if _type_changes(old, value):
                old = _kept_for_new_type(old, str(value["type"]), kind=key, path=path)
            out[key] = deep_merge(old, value, where=f"{path}.")
        else:
            out[key] = copy.deepcopy(value)
    return out


def _is_index(key: str) -> bool:
    return key.removeprefix("-").isdigit()


def _merge_entries(entries: list[Any], top: OverrideTree, path: str) -> list[Any]:
    """``top``'s values laid over the entries of a list, each key an index (negative ones count from the end)."""
    out = copy.deepcopy(entries)
    n = len(out)
    span = f"{n} entries (0 to {n - 1})" if n > 1 else "1 entry (0)" if n == 1 else "no entries"
    for key, value in top.items():
        if not _is_index(key):
            raise RecipeError([(f"{path}.{key}", f"{path} is a list: give an index, not {key!r}; it has {span}")])
        index = int(key)
        if not -n <= index < n:
            raise RecipeError([(f"{path}.{key}", f"index {index} is past the end: {path} has {span}")])
        old = out[index]
        if isinstance(old, dict) and isinstance(value, Mapping):
            out[index] = deep_merge(old, value, where=f"{path}.{key}.")
        else:
            out[index] = copy.deepcopy(value)
    return out


def _type_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` names another ``type`` than ``old`` (a value that is not even equal to itself, such as
    NaN, counts as the same object, not as a change)."""
    if "type" not in old or "type" not in new:
        return False
    return new["type"] is not old["type"] and new["type"] != old["type"]


def _kept_for_new_type(old: dict[str, Any], new_type: str, *, kind: str, path: str) -> dict[str, Any]:
    """The options of ``old`` (a spec of another type) that a ``new_type`` component accepts; a warning names
    those dropped. An unknown new type keeps nothing: validation then names the type."""
    accepted = _accepted_options(kind, new_type)
    if accepted is None:
        return {}
    kept = {k: v for k, v in old.items() if k != "type" and k in accepted}
    dropped = sorted(k for k in old if k != "type" and k not in accepted)
    if dropped:
        warnings.warn(
            f"{path}: {old.get('type')!r} -> {new_type!r} keeps {', '.join(sorted(kept)) or 'no options'}; "
            f"dropped {', '.join(dropped)} ({new_type!r} has no such option)",
            RecipeWarning,
            stacklevel=4,
        )
    return kept


def _accepted_options(kind: str, name: str) -> set[str] | None:
    """The option names of the registered component ``name`` (of ``kind`` when that is a kind; else the one
    component of that name in any kind), or None when there is no such single component."""
    from zoo.plugins import get_registry
    from zoo.registry import KINDS

    registry = get_registry()
    found = [c for c in registry if c.name == name and (c.kind == kind or kind not in KINDS)]
    if len(found) != 1:
        return None
    return set(found[0].config.model_fields)


def _file_key(path: Path) -> str:
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return str(path.absolute())


def _resolve_extends(data: dict[str, Any], path: Path | None) -> dict[str, Any]:
    """``data`` deep-merged over its chain of ``extends`` parents (at most ``MAX_EXTENDS`` files, no cycle)."""
    chain = [data]
    here = path
    seen = {_file_key(path)} if path is not None else set()
    while "extends" in chain[-1]:
        parent_ref = chain[-1].pop("extends")
        source = str(here) if here is not None else None
        if not isinstance(parent_ref, str) or not parent_ref.strip():
            raise RecipeError(f"extends: must be a recipe name or path, not {_describe(parent_ref)}", source=source)
        if len(chain) >= MAX_EXTENDS:
            raise RecipeError(f"extends: a chain of more than {MAX_EXTENDS} recipe files", source=source)
        try:
            parent_path = find_recipe(parent_ref, here.parent if here is not None else None)
        except RecipeError as exc:
            raise RecipeError([("extends", m) for _, m in exc.errors], source=source) from None
        key = _file_key(parent_path)
        if key in seen:
            raise RecipeError(f"extends: cycle through {_describe(parent_ref)}", source=source)
        seen.add(key)
        parent = read_recipe_file(parent_path)
        parent.pop("expect", None)  # a parent's expected size is a fact about the parent, not the child
        chain.append(parent)
        here = parent_path
    merged = chain.pop()
    while chain:
        merged = deep_merge(merged, chain.pop())
    return merged
