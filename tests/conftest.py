"""Shared fixtures: a throwaway plugin registered for one test and removed after it.

The whole suite (``python -m pytest``, with or without ``-m``) runs on two pytest-xdist workers when xdist is
installed (the ``dev`` extra) and the command line names no ``-n``; ``-n0`` or ``-p no:xdist`` runs it in one
process, and a run of chosen files or tests stays in one process unless ``-n`` says otherwise. Each worker
gives torch one intra-op thread: the models are tiny, and two processes of two threads each spin against each
other on two cores.
"""

from __future__ import annotations

import os

import pytest

# Tests see only the built-ins and the plugins installed for them, never a user's extra packages' failures.
os.environ.setdefault("ZOO_STRICT_PLUGINS", "0")

WORKERS = 2
"""xdist workers when the command line does not say (``-n``)."""


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Two xdist workers for the whole suite (no paths given), unless ``-n`` was given or xdist is absent or
    disabled."""
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return  # chosen files or tests
    option = config.option
    if getattr(option, "numprocesses", 0) is not None or getattr(option, "tx", None):
        return  # -n given (-n0 included), or explicit --tx
    if option.collectonly or config.getoption("usepdb", False) or _cpus() < 2:
        return
    option.numprocesses = WORKERS


TERMINAL = ("COLUMNS", "LINES")
"""Set in the C environment (not ``os.environ``) of the pytest process once readline is loaded, so inherited
by the processes it starts: the workers see them, the tests of a single process do not (a CLI test then
wraps at 80 columns). Each worker gets the main process's ``os.environ`` values instead."""


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # xdist, in the main process: a worker is about to start
    node.workerinput["zoo_terminal"] = {name: os.environ.get(name) for name in TERMINAL}


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker
        for name, value in config.workerinput.get("zoo_terminal", {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        import torch

        torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers, the slow tests first (in their order): the workers share them out at the start and the
    quick ones even out the end, instead of one worker running a long test alone after the other is done."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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
