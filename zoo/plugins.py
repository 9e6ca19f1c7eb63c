"""The one PluginManager: built-in components and installed plugin packages, loaded the same way.

Loading is idempotent and isolated per plugin. A plugin that fails to import, declares another plugin API
version, raises in a hook, implements a hook that does not exist, or registers a name (component or
recipe) that is already taken is recorded with its error, rolled back whole and reported once as a
``PluginWarning``; the rest of the zoo keeps working. ``ZOO_STRICT_PLUGINS=1`` turns that report into a
``PluginError`` (for CI). ``ZOO_DISABLE_PLUGINS=name,...`` (``zoo --disable-plugins``) skips installed plugins.

The collision rule: the first registration of a name wins. Built-ins register first, then installed
plugins in order of entry-point name; a later plugin that registers a taken name fails as a whole, with an
error naming both plugins.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from . import __version__, accelerator_hooks, hf_hooks, hookspecs
from .errors import PluginError, ZooWarning
from .hf_hooks import _FolderHooks
from .hookspecs import PLUGIN_API_VERSION
from .registry import Registry

__all__ = [
    "PLUGIN_API_VERSION",
    "PluginInfo",
    "PluginWarning",
    "explain_unknown",
    "failures",
    "get_registry",
    "hf_families",
    "hf_folder_recipe",
    "load_hf_folder",
    "load_plugins",
    "plugins",
    "recipe_files",
    "recipe_paths",
    "recipe_sources",
    "register_plugin",
    "report_recipe_problem",
    "reset",
    "unregister_plugin",
]

ENTRY_POINT_GROUP = "zoo"

BUILTIN_PLUGINS: tuple[str, ...] = (
    "zoo.components.embedding",
    "zoo.components.audio",
    "zoo.components.positional",
    "zoo.components.attention",
    "zoo.components.mla",
    "zoo.components.norm",
    "zoo.components.ffn",
    "zoo.components.moe",
    "zoo.components.heads",
    "zoo.components.kernels",
    "zoo.architectures",
    "zoo.hf",
)


pm = pluggy.PluginManager("zoo")
pm.add_hookspecs(hookspecs)
pm.add_hookspecs(_FolderHooks)


class PluginWarning(ZooWarning):
    """A plugin was skipped: it failed to load or register. The zoo works on without it."""


@dataclass
class PluginInfo:
    """What ``zoo plugins`` shows for one plugin: who it is, what it registered, and whether it works."""

    name: str
    """The entry-point name (an installed plugin), the module path (a built-in) or the name given."""
    version: str | None = None
    dist: str | None = None
    """The distribution that installed it, when it came from an entry point."""
    builtin: bool = False
    api: Any = None
    """The ``ZOO_PLUGIN_API`` the plugin declares (None: not declared, taken as current)."""
    registered: dict[str, list[str]] = field(default_factory=dict)
    """Component names by kind, in registration order (empty when the plugin failed)."""
    recipes: list[str] = field(default_factory=list)
    """Names of the recipes it ships."""
    hf_families: list[str] = field(default_factory=list)
    """``model_type`` of each Hugging Face family it imports (``register_hf_families``)."""
    accelerators: list[str] = field(default_factory=list)
    """Names of the accelerators it registers (``register_accelerators``)."""
    provides: dict[str, list[str]] = field(default_factory=dict)
    """For a failed plugin: the components it would have registered, as far as they can be known."""
    error: str | None = None
    disabled: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.disabled

    @property
    def status(self) -> str:
        """``ok``, ``failed`` or ``disabled``."""
        return "disabled" if self.disabled else "failed" if self.error else "ok"


_registry: Registry | None = None
_plugins: dict[str, PluginInfo] = {}
_recipes: dict[str, tuple[str, Path]] = {}  # recipe name -> (plugin, the file or directory that ships it)
_recipe_paths: list[tuple[str, Path]] = []  # (plugin, file or directory), in registration order


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def _disabled() -> set[str]:
    names = os.environ.get("ZOO_DISABLE_PLUGINS", "").split(",")
    return {_normalise(n) for n in names if n.strip()}


def _strict() -> bool:
    return os.environ.get("ZOO_STRICT_PLUGINS", "").strip().lower() not in ("", "0", "false", "no", "off")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _exception(exc: BaseException) -> str:
    return _one_line(f"{type(exc).__name__}: {exc}")


def _not_an_interrupt(exc: BaseException) -> None:
    """Re-raise ``exc`` when it is the user's interrupt; any other exception of a plugin is the plugin's failure.

    A plugin that raises ``SystemExit`` at import (or in a hook) would otherwise end every zoo command with its
    exit status and no message; ``KeyboardInterrupt`` and ``GeneratorExit`` are left to do what they mean.
    """
    if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
        raise exc


def _fail(info: PluginInfo, error: str, cause: BaseException | None = None) -> None:
    """Record why ``info`` failed; warn in one line, or raise ``PluginError`` in strict mode."""
    info.error = _one_line(error)
    if _strict():
        raise PluginError(f"plugin '{info.name}' failed: {info.error} (ZOO_STRICT_PLUGINS is set)") from cause
    message = f"plugin '{info.name}' failed and was skipped: {info.error}"
    # warn_explicit with a location that has no source line: the report is exactly one line.
    warnings.warn_explicit(message, PluginWarning, filename="zoo", lineno=0, module="zoo.plugins")


# ---------------------------------------------------------------------------------------------- finding


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """The installed entry points of group ``zoo``."""
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _info_for(ep: importlib.metadata.EntryPoint) -> PluginInfo:
    dist = getattr(ep, "dist", None)
    return PluginInfo(
        ep.name,
        version=dist.version if dist is not None else None,
        dist=dist.metadata["Name"] if dist is not None else None,
    )


def recipe_files(path: Path) -> list[Path]:
    """The recipe files a shipped path stands for: itself, or the ``*.y*ml`` / ``*.json`` files in it."""
    if path.is_file():
        return [path]
    return sorted(path.glob("*.y*ml")) + sorted(path.glob("*.json"))


def _probe(plugin: Any) -> dict[str, list[str]]:
    """The component names a plugin's ``register_components`` would register, without registering any.

    Used after a plugin failed, so that a recipe naming one of its components is told why it is missing.
    """
    names: dict[str, list[str]] = {}

    def record(kind: Any, name: Any, *args: Any, **kwargs: Any) -> None:
        names.setdefault(str(kind), []).append(str(name))

    hook = getattr(plugin, "register_components", None)
    if callable(hook):
        try:
            hook(register=record)
        except BaseException as exc:  # noqa: BLE001 - the plugin has already failed; keep what was recorded
            _not_an_interrupt(exc)
    return names


# ---------------------------------------------------------------------------------------------- registering


def _unknown_hooks(plugin: Any) -> list[str]:
    unknown = []
    for caller in pm.get_hookcallers(plugin) or []:
        impls = [i for i in caller.get_hookimpls() if i.plugin is plugin]
        if not caller.has_spec() and not any(i.optionalhook for i in impls):
            unknown.append(caller.name)
    return unknown


def _run_hooks(registry: Registry, info: PluginInfo, plugin: Any, attempted: dict[str, list[str]]) -> None:
    """Register ``plugin`` with pluggy and run its hooks; raise on any problem (the caller rolls back)."""

    def register(kind: str, name: str, factory: Any, config: Any, description: str | None = None) -> None:
        attempted.setdefault(kind, []).append(name)
        registry.add(kind, name, factory, config, description=description, plugin=info.name)

    pm.register(plugin, name=info.name)
    unknown = _unknown_hooks(plugin)
    if unknown:
        known = ", ".join(n for n in dir(hookspecs) if hasattr(getattr(hookspecs, n), "zoo_spec"))
        hooks = ", ".join(map(repr, unknown))
        raise PluginError(f"implements unknown hook {hooks}; the hooks of plugin API {PLUGIN_API_VERSION} are: {known}")
    for impl in pm.hook.register_components.get_hookimpls():
        if impl.plugin is plugin:
            try:
                impl.function(register=register)
            except PluginError:
                raise
            except BaseException as exc:
                _not_an_interrupt(exc)
                raise PluginError(f"register_components raised {_exception(exc)}") from exc
    for impl in pm.hook.register_recipes.get_hookimpls():
        if impl.plugin is plugin:
            try:
                shipped = [Path(p) for p in (impl.function() or [])]
            except BaseException as exc:
                _not_an_interrupt(exc)
                raise PluginError(f"register_recipes raised {_exception(exc)}") from exc
            _add_recipes(info, shipped)
    for impl in pm.hook.register_hf_families.get_hookimpls():
        if impl.plugin is plugin:
            try:
                families = list(impl.function() or [])
            except BaseException as exc:
                _not_an_interrupt(exc)
                raise PluginError(f"register_hf_families raised {_exception(exc)}") from exc
            hf_hooks.add_hf_families(info, families, _plugins)
    for impl in pm.hook.register_accelerators.get_hookimpls():
        if impl.plugin is plugin:
            try:
                devices = list(impl.function() or [])
            except BaseException as exc:
                _not_an_interrupt(exc)
                raise PluginError(f"register_accelerators raised {_exception(exc)}") from exc
            owners = {name: p.builtin for name, p in _plugins.items()}
            info.accelerators += accelerator_hooks.add_accelerators(info.name, devices, owners)


def hf_families() -> dict[str, Any]:
    """HF ``model_type`` -> ``zoo.hf.mapping.Family`` registered through ``register_hf_families``: the built-in
    plugin ``zoo.hf``'s families first, then the installed plugins', in load order."""
    load_plugins()
    return hf_hooks.families()


def hf_folder_recipe(path: Path) -> dict[str, Any]:
    """The recipe (a dict) of a Hugging Face folder (``zoo.locate``'s kind ``hf``), read by the built-in ``zoo.hf``.

    Raises:
        HFImportError: the model type, class or a config option is not supported (all options named).
    """
    load_plugins()
    return hf_hooks.folder_recipe(pm.hook, path)


def load_hf_folder(path: Path, *, device: Any = None) -> Any:
    """The model of a Hugging Face folder (``zoo.locate``'s kind ``hf``), converted by the built-in ``zoo.hf``.

    Raises:
        HFImportError: an unsupported family, class or config option, or weights that do not fit the model.
    """
    load_plugins()
    return hf_hooks.load_folder(pm.hook, path, device)


def _add_recipes(info: PluginInfo, shipped: list[Path]) -> None:
    found: dict[str, Path] = {}
    for path in shipped:
        if not path.exists():
            raise PluginError(f"register_recipes returned '{path}', which is not a file or directory")
        for f in recipe_files(path):
            owner = _recipes.get(f.stem, (None,))[0]
            if owner is not None or f.stem in found:
                raise PluginError(
                    f"recipe '{f.stem}' is shipped twice: by plugin '{owner or info.name}' and by plugin '{info.name}'"
                )
            found[f.stem] = path
    for name, path in found.items():
        _recipes[name] = (info.name, path)
        info.recipes.append(name)
    _recipe_paths.extend((info.name, p) for p in shipped)


def _forget(registry: Registry, name: str) -> None:
    """Remove everything plugin ``name`` registered: components, recipes, its pluggy registration."""
    registry.remove_plugin(name)
    for recipe in [r for r, (owner, _) in _recipes.items() if owner == name]:
        del _recipes[recipe]
    hf_hooks.forget_hf_families(name)
    accelerator_hooks.forget_accelerators(name)
    _recipe_paths[:] = [(owner, p) for owner, p in _recipe_paths if owner != name]
    if pm.has_plugin(name):
        pm.unregister(name=name)


def _register_one(registry: Registry, info: PluginInfo, plugin: Any) -> None:
    """Register one plugin object, or record why it failed and roll it back whole."""
    if info.name in _plugins:
        other = _plugins[info.name]
        taken = f"distribution '{other.dist}'" if other.dist else "another plugin"
        _plugins[f"{info.name} ({info.dist or id(plugin)})"] = info  # its own row in `zoo plugins`
        _fail(info, f"the plugin name '{info.name}' is already taken by {taken}")
        return
    _plugins[info.name] = info
    try:
        info.api = getattr(plugin, "ZOO_PLUGIN_API", None)
    except BaseException as exc:  # noqa: BLE001 - a module whose __getattr__ raises
        _not_an_interrupt(exc)
        _fail(info, f"reading ZOO_PLUGIN_API raised {_exception(exc)}", exc)
        return
    if not info.builtin and info.api is not None and (type(info.api) is not int or info.api != PLUGIN_API_VERSION):
        _fail(info, f"declares plugin API version {info.api!r}; this zoo provides version {PLUGIN_API_VERSION}")
        return
    attempted: dict[str, list[str]] = {}
    try:
        _run_hooks(registry, info, plugin, attempted)
    except BaseException as exc:
        if info.builtin or isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
            raise  # a broken built-in is a zoo bug, not something to work around
        _forget(registry, info.name)
        info.recipes.clear()
        info.hf_families.clear()
        info.accelerators.clear()
        info.provides = _probe(plugin) or attempted
        _fail(info, str(exc) if isinstance(exc, PluginError) else _exception(exc), exc)
        return
    info.registered = attempted


SLOW_IMPORT_S = 5.0
"""A plugin whose import takes longer is named, with its time (it slows every command, ``--help`` included)."""


def load_plugins() -> Registry:
    """Load built-ins and installed plugins once; later calls return the same registry."""
    global _registry
    if _registry is not None:
        return _registry
    for name, _ in pm.list_name_plugin():
        pm.unregister(name=name)
    _plugins.clear()
    _recipes.clear()
    _recipe_paths.clear()
    hf_hooks.clear_hf_families()
    accelerator_hooks.clear_accelerators()
    # Published before the plugins run, so a hook that looks something up sees the registry being filled.
    registry = _registry = Registry()
    try:
        for dotted in BUILTIN_PLUGINS:
            builtin = PluginInfo(dotted, version=__version__, builtin=True)
            _register_one(registry, builtin, importlib.import_module(dotted))
        disabled = _disabled()
        for ep in sorted(_entry_points(), key=lambda ep: ep.name):  # one order, so one collision winner
            info = _info_for(ep)
            if _normalise(ep.name) in disabled or (info.dist is not None and _normalise(info.dist) in disabled):
                info.disabled = True
                _plugins.setdefault(ep.name, info)
                continue
            started = time.perf_counter()
            try:
                plugin = ep.load()
            except BaseException as exc:  # noqa: BLE001 - any import failure is the plugin's, not ours
                _not_an_interrupt(exc)
                _plugins.setdefault(ep.name, info)
                _fail(info, _exception(exc), exc)
                continue
            if (took := time.perf_counter() - started) > SLOW_IMPORT_S:
                message = f"plugin '{ep.name}' took {took:.1f} s to import, which every zoo command waits for"
                warnings.warn_explicit(message, PluginWarning, filename="zoo", lineno=0, module="zoo.plugins")
            _register_one(registry, info, plugin)
    except BaseException:
        _registry = None  # strict mode (or a broken built-in): the next call starts over
        raise
    return registry


def get_registry() -> Registry:
    """The registry of all loaded components (loading plugins on first use)."""
    return load_plugins()


def register_plugin(plugin: Any, name: str) -> PluginInfo:
    """Register a plugin object at run time (tests, notebooks), with the same checks as an installed one.

    Returns its ``PluginInfo``; when it failed, ``info.error`` says why (strict mode raises instead).
    """
    registry = load_plugins()
    info = PluginInfo(name, version=getattr(plugin, "__version__", None))
    _register_one(registry, info, plugin)
    return info


def unregister_plugin(name: str) -> None:
    """Undo ``register_plugin``: forget the plugin and everything it registered."""
    _forget(load_plugins(), name)
    _plugins.pop(name, None)


def plugins() -> list[PluginInfo]:
    """Every plugin seen (loaded, failed or disabled), built-ins first."""
    load_plugins()
    return sorted(_plugins.values(), key=lambda p: (not p.builtin, p.name))


def failures() -> list[PluginInfo]:
    """The plugins that failed (not those disabled on purpose)."""
    return [p for p in plugins() if p.error is not None]


def recipe_paths() -> list[Path]:
    """Recipe files and directories shipped by plugins (the built-in one ships ``recipes/``)."""
    load_plugins()
    return [path for _, path in _recipe_paths]


def recipe_sources() -> list[tuple[str, Path]]:
    """``(plugin, file or directory)`` for every recipe path shipped, in registration order."""
    load_plugins()
    return list(_recipe_paths)


def report_recipe_problem(plugin: str, path: Path, problem: str) -> None:
    """A recipe file that ``plugin`` ships cannot be read: one ``PluginWarning`` line (``PluginError`` in strict
    mode); the recipe is left out of the named recipes, and everything else keeps working."""
    message = f"plugin '{plugin}' ships recipe '{path.stem}' ({path}), which cannot be read: {_one_line(problem)}"
    if _strict():
        raise PluginError(f"{message} (ZOO_STRICT_PLUGINS is set)")
    warnings.warn_explicit(f"{message}; skipped", PluginWarning, filename="zoo", lineno=0, module="zoo.plugins")


def explain_unknown(kind: str, name: str, message: str) -> str:
    """``message`` (an unknown-component error) with what failed or disabled plugins have to do with it."""
    load_plugins()
    for p in _plugins.values():
        if p.error is not None and name in p.provides.get(kind, []):
            return f"{kind} type {name!r} is not available: plugin '{p.name}' failed to load: {p.error}"
    notes = []
    unknown = [p for p in _plugins.values() if p.error is not None and not p.provides]
    if unknown:
        notes.append("plugins that failed to load: " + ", ".join(f"{p.name} ({p.error})" for p in unknown))
    disabled = [p.name for p in _plugins.values() if p.disabled]
    if disabled:
        notes.append("disabled plugins: " + ", ".join(disabled))
    return "; ".join([message, *notes])


def reset() -> None:
    """Forget everything loaded; the next use loads again (tests use this to reload with other settings)."""
    global _registry
    for name, _ in pm.list_name_plugin():
        pm.unregister(name=name)
    _registry = None
    _plugins.clear()
    _recipes.clear()
    _recipe_paths.clear()
    hf_hooks.clear_hf_families()
    accelerator_hooks.clear_accelerators()
