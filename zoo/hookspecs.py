"""The plugin API: the hooks a zoo plugin may implement. This module is the public contract.

A plugin is a module (or any object) whose functions are decorated with ``zoo.hookimpl`` and named after
the hooks below. Installed packages are found through entry points of group ``zoo``; the built-in
components use exactly the same hooks (``zoo/components/*.py``). A minimal plugin module::

    import zoo

    ZOO_PLUGIN_API = 1        # the version of this contract the plugin was written for

    @zoo.hookimpl
    def register_components(register):
        register("norm", "scalenorm", ScaleNorm, ScaleNormConfig)

Versioning. ``PLUGIN_API_VERSION`` is an integer that changes only when a hook below changes in a way that
breaks existing plugins (a renamed or removed hook or argument, a changed ``register`` signature or
component contract). Adding a hook does not change it. A plugin declares the version it was written for
with a module-level ``ZOO_PLUGIN_API``; when it differs from this zoo's, the plugin is reported as
incompatible and skipped instead of being called. A plugin that declares nothing is assumed current.

Hooks are called once per process, in registration order: built-ins first, then installed plugins sorted
by entry-point name. A hook that raises, or a name that is already registered, makes the whole plugin fail:
everything it registered is rolled back, it is reported (a ``zoo.plugins.PluginWarning`` line and a row in
``zoo plugins``), and the rest of the zoo keeps working. The first registration of a name wins.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pluggy

PLUGIN_API_VERSION = 1
"""Version of the hooks in this module; a plugin declares the one it targets as ``ZOO_PLUGIN_API``."""

hookspec = pluggy.HookspecMarker("zoo")
hookimpl = pluggy.HookimplMarker("zoo")

Register = Callable[..., Any]
"""``register(kind, name, factory, config, description=None)``: see :func:`register_components`."""


@hookspec
def register_components(register: Register) -> None:
    """Register components: call ``register(kind, name, factory, config, description=None)`` for each.

    - ``kind``: one of ``zoo.registry.KINDS`` (architecture, embedding, positional, attention, norm, ffn, head,
      kernel).
    - ``name``: the ``type`` recipes use; unique within its kind across all plugins.
    - ``factory``: called as ``factory(d_model, **config_fields, **context)`` to build an ``nn.Module``
      (architectures: ``factory(recipe, make)``). ``context`` holds only the ``zoo.BuildContext`` fields
      the factory's signature names (``causal``, ``cross``, ``max_len``, ``layer_idx``, ...).
    - ``config``: a ``zoo.ComponentConfig`` subclass with ``type: Literal[name] = name``; its fields are
      the recipe keys, validated before any tensor exists. ``requires_causal = True`` refuses non-causal
      stacks; ``check(ctx)`` adds rules that need the surrounding model.
    - ``description``: one line for listings; default the first line of the factory's docstring.

    The module built must keep its kind's contract (docs/writing-a-plugin.md lists them): for attention,
    ``forward(x, *, context=None, mask=None, positions=None, pos=None, cache=None)`` and
    ``new_cache(batch_size, max_len)`` returning an object with ``nbytes`` and ``length``. A ``zoo.cache``
    ``KVCache`` or ``RollingKVCache`` becomes a ``StaticKVCache`` for compiled decoding by itself; a cache of
    another kind that also has ``select(rows)`` lets finished rows leave a batch.
    """


@hookspec
def register_recipes() -> list[str | Path]:
    """Return recipe files, or directories of ``*.yaml`` / ``*.json`` recipes, that this plugin ships.

    A recipe is named by its file stem (``mistral-tiny.yaml`` is ``zoo.build("mistral-tiny")``); the first
    plugin to ship a name keeps it, exactly as for components.
    """


@hookspec
def register_hf_families() -> list[Any]:
    """Return ``zoo.hf.mapping.Family`` objects: Hugging Face model families this plugin imports and exports.

    Added in plugin API 1 (zoo 0.1); a zoo without it reports such a plugin as implementing an unknown hook.
    A family is the same data a built-in ``zoo/hf/<family>.py`` defines (its ``model_type``, HF classes,
    config options, weight table, recipe and config translations); its components must be registered too,
    by this plugin's ``register_components`` or any other. ``zoo.hf.families()`` (what ``from_hf``, ``zoo
    import`` and ``zoo export`` read) holds the built-in families first (the built-in plugin ``zoo.hf`` registers
    them through this hook), then the plugins' in load order.
    A ``model_type`` already imported by a built-in family or another plugin makes the plugin fail, as a
    taken component name does::

        @zoo.hookimpl
        def register_hf_families():
            from .hf import MAMBA
            return [MAMBA]
    """


@hookspec
def register_accelerators() -> list[Any]:
    """Return accelerators ``zoo plan --gpu NAME`` can plan for: ``zoo.analysis.plan.Accelerator`` objects, or dicts
    with a ``name`` and the fields of an entry of ``zoo/data/accelerators.yaml`` (its header says what each means).

    Added in plugin API 1 (zoo 0.1); a zoo without it reports such a plugin as implementing an unknown hook.
    Every figure must be positive; ``source`` (which document each figure comes from) is optional but listed by
    ``zoo plan --json``. Names are case-insensitive; ``zoo.analysis.accelerators.accelerators()`` holds zoo's
    catalogue first, then the plugins' in load order. A name already in the catalogue or registered by another
    plugin makes the plugin fail, as a taken component name does::

        @zoo.hookimpl
        def register_accelerators():
            return [{"name": "my-npu", "title": "My NPU 64GB", "memory": "64 GB HBM3", "memory_gib": 63.5,
                     "flops": 400e12, "bandwidth": 2.0e12, "link": 200e9, "network": 25e9, "per_node": 8}]
    """
