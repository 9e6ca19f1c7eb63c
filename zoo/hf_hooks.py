"""The Hugging Face part of the plugin manager: the hooks through which the built-in plugin ``zoo.hf`` reads the
Hugging Face folders that ``zoo.locate`` finds, and the families that plugins import (``register_hf_families``),
by ``model_type``.

This module holds those hookspecs and the families' state; ``zoo.plugins``, which owns the one PluginManager,
adds the hookspecs to it, records and forgets the families through the functions here and re-exports
``hf_families``, ``hf_folder_recipe`` and ``load_hf_folder``. It imports nothing of ``zoo.plugins``: what it
needs of the manager (its ``hook``, who is built in) is passed in.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import PluginError
from .hookspecs import hookspec


class _FolderHooks:
    """Hooks between zoo's own layers, not part of the plugin API: the built-in plugin ``zoo.hf`` reads the Hugging
    Face folders that ``zoo.locate`` finds, for the recipe loader and ``zoo.load``, which sit below it."""

    @hookspec(firstresult=True)
    def hf_folder_recipe(self, path: Path) -> dict[str, Any] | None:
        """The recipe (a dict) of the Hugging Face folder ``path``; its weights are not read."""

    @hookspec(firstresult=True)
    def load_hf_folder(self, path: Path, device: Any) -> Any:
        """The model of the Hugging Face folder ``path``, its weights loaded, moved to ``device`` unless None."""


_hf_families: dict[str, tuple[str, Any]] = {}  # HF model_type -> (plugin, zoo.hf.mapping.Family)


def _is_family(value: Any) -> bool:
    """Whether ``value`` is a ``zoo.hf.mapping.Family``. zoo.hf is a plugin above this module, so its class is
    looked up where it is defined, not imported: a family can only exist once ``zoo.hf.mapping`` is loaded."""
    mapping = sys.modules.get("zoo.hf.mapping")
    return mapping is not None and isinstance(value, mapping.Family)


def add_hf_families(info: Any, families: list[Any], plugins: Mapping[str, Any]) -> None:
    """Record the ``families`` that plugin ``info`` (a ``zoo.plugins.PluginInfo``) imports; ``plugins``: every
    ``PluginInfo`` by name, to tell a built-in owner apart. Raises ``PluginError``, recording none, when one is not a
    family or its ``model_type`` is taken."""
    found: dict[str, Any] = {}
    for family in families:
        if not _is_family(family):
            raise PluginError(f"register_hf_families returned {family!r}, not a zoo.hf.mapping.Family")
        model_type = family.model_type
        owner = _hf_families.get(model_type, (None,))[0]
        if owner is not None and plugins[owner].builtin:
            owner = "zoo (built-in)"
        if owner is not None or model_type in found:
            raise PluginError(
                f"Hugging Face model_type '{model_type}' is imported twice: by {owner or info.name} and by plugin "
                f"'{info.name}'"
            )
        found[model_type] = family
    for model_type, family in found.items():
        _hf_families[model_type] = (info.name, family)
        info.hf_families.append(model_type)


def forget_hf_families(plugin: str) -> None:
    """Drop the families that ``plugin`` imported."""
    for model_type in [t for t, (owner, _) in _hf_families.items() if owner == plugin]:
        del _hf_families[model_type]


def clear_hf_families() -> None:
    """Forget every family (the plugins are loaded again)."""
    _hf_families.clear()


def families() -> dict[str, Any]:
    """HF ``model_type`` -> ``zoo.hf.mapping.Family``, in registration order, as recorded so far."""
    return {model_type: family for model_type, (_, family) in _hf_families.items()}


def folder_recipe(hook: Any, path: Path) -> dict[str, Any]:
    """The recipe of the Hugging Face folder ``path`` through ``hook`` (the loaded manager's ``pm.hook``)."""
    recipe = hook.hf_folder_recipe(path=Path(path))
    if recipe is None:
        raise PluginError(f"{path} is a Hugging Face folder, and no plugin reads those (zoo.hf is not registered)")
    return recipe


def load_folder(hook: Any, path: Path, device: Any) -> Any:
    """The model of the Hugging Face folder ``path`` through ``hook`` (the loaded manager's ``pm.hook``)."""
    model = hook.load_hf_folder(path=Path(path), device=device)
    if model is None:
        raise PluginError(f"{path} is a Hugging Face folder, and no plugin reads those (zoo.hf is not registered)")
    return model
