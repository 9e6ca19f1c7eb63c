"""The plugin API: the hooks a zoo plugin may implement.

A plugin is a module (or any object) with functions decorated by ``zoo.hookimpl`` whose names match the
hooks below. Built-in components use exactly the same hooks.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("zoo")
hookimpl = pluggy.HookimplMarker("zoo")


@hookspec
def register_components(register):
    """Register components: call ``register(kind, name, factory, config, description=None)`` for each."""


@hookspec
def register_recipes():
    """Return a list of recipe files or directories of ``*.yaml`` recipes that this plugin ships."""
