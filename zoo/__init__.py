"""zoo: Transformer architectures assembled from registered components by recipe files.

    import zoo
    model = zoo.build("gpt2-small")                 # a named recipe, a path, a dict or a Recipe
    model = zoo.build("recipes/llama-tiny.yaml", num_layers=2, device="meta")

Importing ``zoo`` is cheap: torch and the registry load on first use of what needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import PluginError, RecipeError, UnknownComponentError, ZooError
from .hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = [
    "PLUGIN_API_VERSION",
    "BuildContext",
    "ComponentConfig",
    "Cost",
    "PluginError",
    "Recipe",
    "RecipeError",
    "Spec",
    "UnknownComponentError",
    "ZooError",
    "build",
    "check_buildable",
    "list_components",
    "count_parameters",
    "from_hf",
    "get_registry",
    "hookimpl",
    "load",
    "load_recipe",
    "save",
    "to_hf",
    "use_kernel",
]

_LAZY = {
    "build": "zoo.builder",
    "check_buildable": "zoo.builder",
    "count_parameters": "zoo.builder",
    "load_recipe": "zoo.recipe",
    "Recipe": "zoo.recipe",
    "BuildContext": "zoo.config",
    "ComponentConfig": "zoo.config",
    "Cost": "zoo.cost",
    "Spec": "zoo.config",
    "get_registry": "zoo.plugins",
    "from_hf": "zoo.hf",
    "to_hf": "zoo.hf",
    "PLUGIN_API_VERSION": "zoo.plugins",
    "save": "zoo.checkpoint",
    "load": "zoo.checkpoint",
    "use_kernel": "zoo.components.kernels",
}

if TYPE_CHECKING:
    from .builder import build, check_buildable, count_parameters
    from .checkpoint import load, save
    from .components.kernels import use_kernel
    from .config import BuildContext, ComponentConfig, Spec
    from .cost import Cost
    from .hf import from_hf, to_hf
    from .plugins import PLUGIN_API_VERSION, get_registry
    from .recipe import Recipe, load_recipe


def list_components(kind: str | None = None) -> list[Any]:
    """Registered components (``zoo.registry.Component``), of one kind or all."""
    registry = importlib.import_module("zoo.plugins").get_registry()
    return [c for c in registry if kind is None or c.kind == kind]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        # `zoo.build` is both a submodule and a function; the function wins as the public name.
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")
