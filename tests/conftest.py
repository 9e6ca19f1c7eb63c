"""Shared fixtures: a throwaway plugin registered for one test and removed after it."""

from __future__ import annotations

import os

import pytest

# Tests see only the built-ins and the plugins installed for them, never a user's extra packages' failures.
os.environ.setdefault("ZOO_STRICT_PLUGINS", "0")


@pytest.fixture
def register_plugin():
    """Register plugin objects for the duration of one test: ``register_plugin(obj, "name")``."""
    from zoo import plugins

    names: list[str] = []

    def _register(plugin, name: str):
        names.append(name)
        return plugins.register_plugin(plugin, name)

    yield _register
    for name in names:
        plugins.unregister_plugin(name)
