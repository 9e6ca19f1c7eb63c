"""The one PluginManager: built-in components and installed plugin packages, loaded the same way.

Loading is idempotent and isolated per plugin: a plugin that fails to import, raises in a hook or
registers a clashing name is recorded in ``failures()`` and skipped; the rest of the zoo keeps working.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError
from .registry import Registry

PLUGIN_API_VERSION = 1
"""The version of the hooks in ``zoo.hookspecs``. A plugin may declare ``ZOO_PLUGIN_API = 1``."""

BUILTIN_PLUGINS: tuple[str, ...] = (
    "zoo.components.embedding",
    "zoo.components.positional",
    "zoo.components.attention",
    "zoo.components.norm",
    "zoo.components.ffn",
    "zoo.components.moe",
    "zoo.components.heads",
    "zoo.architectures",
)

pm = pluggy.PluginManager("zoo")
pm.add_hookspecs(hookspecs)


@dataclass
class PluginInfo:
    """What ``zoo plugins`` shows for one plugin."""

    name: str
    version: str | None = None
    builtin: bool = False
    registered: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


_registry: Registry | None = None
_plugins: dict[str, PluginInfo] = {}
_recipe_paths: list[Path] = []


def _disabled() -> set[str]:
    return {n.strip() for n in os.environ.get("ZOO_DISABLE_PLUGINS", "").split(",") if n.strip()}


def _strict() -> bool:
    return os.environ.get("ZOO_STRICT_PLUGINS", "") not in ("", "0", "false", "False")


def _fail(info: PluginInfo, error: str) -> None:
    info.error = error
    if _strict():
        raise PluginError(f"plugin '{info.name}' failed: {error}")
    warnings.warn(f"zoo: plugin '{info.name}' skipped: {error}", stacklevel=3)


def _check_api(info: PluginInfo, plugin: Any) -> bool:
    version = getattr(plugin, "ZOO_PLUGIN_API", PLUGIN_API_VERSION)
    if version != PLUGIN_API_VERSION:
        _fail(info, f"declares plugin API version {version!r}, this zoo provides {PLUGIN_API_VERSION}")
        return False
    return True


def _collect() -> list[tuple[PluginInfo, Any]]:
    """Import built-ins and entry points of group ``zoo``; record import failures."""
    found: list[tuple[PluginInfo, Any]] = []
    disabled = _disabled()
    for dotted in BUILTIN_PLUGINS:
        info = PluginInfo(dotted, builtin=True)
        found.append((info, importlib.import_module(dotted)))  # a broken built-in is a zoo bug: let it raise
    for ep in importlib.metadata.entry_points(group="zoo"):
        dist = getattr(ep, "dist", None)
        info = PluginInfo(ep.name, version=dist.version if dist else None)
        if ep.name in disabled:
            info.error = "disabled by ZOO_DISABLE_PLUGINS"
            _plugins[ep.name] = info
            continue
        try:
            found.append((info, ep.load()))
        except Exception as exc:  # noqa: BLE001 - any import failure is the plugin's, not ours
            _plugins[ep.name] = info
            _fail(info, f"import failed: {type(exc).__name__}: {exc}")
    return found


def _register_one(registry: Registry, info: PluginInfo, plugin: Any) -> None:
    _plugins[info.name] = info
    if not info.builtin and not _check_api(info, plugin):
        return
    if pm.is_registered(plugin) or pm.has_plugin(info.name):
        pm.unregister(name=info.name)
    pm.register(plugin, name=info.name)

    def register(kind: str, name: str, factory: Any, config: Any, description: str | None = None) -> None:
        registry.add(kind, name, factory, config, description=description, plugin=info.name)
        info.registered.setdefault(kind, []).append(name)

    try:
        for impl in pm.hook.register_components.get_hookimpls():
            if impl.plugin is plugin:
                impl.function(register=register)
        for impl in pm.hook.register_recipes.get_hookimpls():
            if impl.plugin is plugin:
                _recipe_paths.extend(Path(p) for p in (impl.function() or []))
    except Exception as exc:  # noqa: BLE001 - isolate the failing plugin
        if info.builtin:
            raise
        registry.remove_plugin(info.name)
        info.registered.clear()
        pm.unregister(name=info.name)
        _fail(info, f"{type(exc).__name__}: {exc}")


def load_plugins() -> Registry:
    """Load built-ins and installed plugins once; later calls return the same registry."""
    global _registry
    if _registry is None:
        registry = Registry()
        _plugins.clear()
        _recipe_paths.clear()
        for info, plugin in _collect():
            _register_one(registry, info, plugin)
        _registry = registry
    return _registry


def get_registry() -> Registry:
    """The registry of all loaded components (loading plugins on first use)."""
    return load_plugins()


def register_plugin(plugin: Any, name: str) -> PluginInfo:
    """Register a plugin object at run time (tests, notebooks): same checks as an installed one."""
    registry = load_plugins()
    info = PluginInfo(name, version=getattr(plugin, "__version__", None))
    _register_one(registry, info, plugin)
    return info


def unregister_plugin(name: str) -> None:
    """Undo ``register_plugin``: forget the plugin and everything it registered."""
    registry = load_plugins()
    registry.remove_plugin(name)
    _plugins.pop(name, None)
    if pm.has_plugin(name):
        pm.unregister(name=name)


def plugins() -> list[PluginInfo]:
    """Every plugin seen, loaded or failed, built-ins first."""
    load_plugins()
    return sorted(_plugins.values(), key=lambda p: (not p.builtin, p.name))


def failures() -> list[PluginInfo]:
    return [p for p in plugins() if not p.ok]


def recipe_paths() -> list[Path]:
    """Recipe files and directories shipped by plugins (the built-in one ships ``recipes/``)."""
    load_plugins()
    return list(_recipe_paths)


def reset() -> None:
    """Forget everything loaded (tests use this to reload with other settings)."""
    global _registry
    for name in list(pm.list_name_plugin()):
        pm.unregister(name=name[0])
    _registry = None
    _plugins.clear()
    _recipe_paths.clear()
