"""Registered components: what exists, who provided it, and how to find it by name."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from .errors import PluginError, UnknownComponentError

KINDS: tuple[str, ...] = ("architecture", "embedding", "positional", "attention", "norm", "ffn", "head", "kernel")
"""The kinds of component. A ``kernel`` is a function, not a module: what an attention computes its output with
(``zoo.components.kernels``), chosen when a model is built or decodes."""


@dataclass(frozen=True)
class Component:
    """One registered implementation: ``factory(d_model, **config, **context)`` builds an ``nn.Module``."""

    kind: str
    name: str
    factory: Callable[..., Any]
    config: type[BaseModel]
    description: str
    plugin: str
    accepts: frozenset[str] = field(default=frozenset(), compare=False)
    """Keyword names the factory takes; the builder passes only context values named here."""


def _accepted_keywords(factory: Callable[..., Any]) -> frozenset[str]:
    """The keyword names ``factory`` takes. A class whose ``__init__`` passes ``**options`` on to its base
    accepts what the base accepts (a plugin subclass adds its own options without restating the rest)."""
    inits = (
        [c.__dict__["__init__"] for c in factory.__mro__ if "__init__" in c.__dict__]
        if isinstance(factory, type)
        else [factory]
    )
    names: set[str] = set()
    for init in inits:
        try:
            params = list(inspect.signature(init).parameters.values())
        except (TypeError, ValueError):
            return frozenset()
        names.update(p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self")
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return frozenset(names)
    return frozenset({"**"})


def preset(factory: Callable[..., Any], doc: str, /, **fixed: Any) -> Callable[..., Any]:
    """``factory`` with some keyword arguments fixed, under a name of its own: one class, several components.

    ``SwiGLU = preset(GatedMLP, "SwiGLU FFN ...", activation="silu")`` builds a ``GatedMLP``; its config need
    not (and cannot) set ``activation``. ``doc`` is the description listings show.
    """
    made = functools.partial(factory, **fixed)
    made.__doc__ = doc
    return made


def did_you_mean(name: str, choices: list[str]) -> str:
    """`` (did you mean 'x'?)`` when ``name`` is close to one of ``choices``, else ``""``."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class Registry:
    """Components by kind and name. Filled by plugins through the ``register_components`` hook."""

    def __init__(self) -> None:
        self._components: dict[str, dict[str, Component]] = {kind: {} for kind in KINDS}

    def add(
        self,
        kind: str,
        name: str,
        factory: Callable[..., Any],
        config: type[BaseModel],
        *,
        description: str | None = None,
        plugin: str,
    ) -> Component:
        if kind not in self._components:
            raise PluginError(
                f"plugin '{plugin}' registered {name!r} under unknown kind {kind!r}; kinds are: {', '.join(KINDS)}"
            )
        if not (isinstance(config, type) and issubclass(config, BaseModel)):
            raise PluginError(f"plugin '{plugin}': config of {kind} '{name}' must be a pydantic BaseModel class")
        type_field = config.model_fields.get("type")
        if type_field is None or type_field.default != name:
            raise PluginError(
                f"plugin '{plugin}': config of {kind} '{name}' needs a field `type: Literal[{name!r}] = {name!r}`"
            )
        existing = self._components[kind].get(name)
        if existing is not None:
            raise PluginError(
                f"{kind} '{name}' is registered twice: by plugin '{existing.plugin}' and by plugin '{plugin}'"
            )
        if description is None:
            doc = inspect.getdoc(factory) or ""
            description = doc.strip().splitlines()[0] if doc.strip() else ""
        component = Component(kind, name, factory, config, description, plugin, _accepted_keywords(factory))
        self._components[kind][name] = component
        return component

    def get(self, kind: str, name: str) -> Component:
        """The component ``name`` of ``kind``; ``UnknownComponentError`` with the choices otherwise."""
        if kind not in self._components:
            raise UnknownComponentError(f"unknown component kind {kind!r}; kinds are: {', '.join(KINDS)}")
        try:
            return self._components[kind][name]
        except KeyError:
            choices = sorted(self._components[kind])
            raise UnknownComponentError(
                f"unknown {kind} type {name!r}{did_you_mean(name, choices)}; registered: {', '.join(choices) or 'none'}"
            ) from None

    def names(self, kind: str) -> list[str]:
        return sorted(self._components[kind])

    def __iter__(self) -> Iterator[Component]:
        for kind in KINDS:
            yield from (self._components[kind][n] for n in sorted(self._components[kind]))

    def remove_plugin(self, plugin: str) -> None:
        """Forget everything ``plugin`` registered (used when its hook fails half-way)."""
        for by_name in self._components.values():
            for name in [n for n, c in by_name.items() if c.plugin == plugin]:
                del by_name[name]
