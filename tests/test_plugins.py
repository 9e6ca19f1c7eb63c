"""Plugins: installed packages load like built-ins; a broken one is reported in one line and changes nothing else.

Installed plugins are faked with real ``EntryPoint`` objects (``zoo.plugins._entry_points`` patched) whose
modules live in ``sys.modules`` or on a temporary ``sys.path``; the real plugin state is reloaded afterwards.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import types
import warnings
from pathlib import Path
from typing import Any, Literal

import pytest
import torch
from pydantic import create_model
from torch import nn

import zoo
from zoo import plugins
from zoo.config import ComponentConfig

ROOT = Path(__file__).resolve().parents[1]
MISSING = "zoo_dependency_that_is_not_installed"


class HalfNorm(nn.Module):
    """Half of the input: a norm in name only (the tests need a component, not a good one).

    More lines, which a listing leaves out.
    """

    def __init__(self, d_model: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / 2


def norm_config(name: str) -> type[ComponentConfig]:
    return create_model(f"{name}Config", __base__=ComponentConfig, type=(Literal[name], name))


def plugin_module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


@pytest.fixture
def installed(monkeypatch, tmp_path):
    """``installed(("zoo-x", module or dotted path), ...)`` pretends those entry points are installed.

    Strict mode and the disable list start unset; after the test the real installed plugins load again.
    """
    monkeypatch.delenv("ZOO_STRICT_PLUGINS", raising=False)
    monkeypatch.delenv("ZOO_DISABLE_PLUGINS", raising=False)

    def install(*entries: tuple[str, types.ModuleType | str]) -> None:
        points = []
        for name, plugin in entries:
            if isinstance(plugin, types.ModuleType):
                monkeypatch.setitem(sys.modules, plugin.__name__, plugin)
                plugin = plugin.__name__
            points.append(importlib.metadata.EntryPoint(name=name, value=plugin, group="zoo"))
        monkeypatch.setattr(plugins, "_entry_points", lambda: points)
        plugins.reset()

    yield install
    plugins.reset()


def load() -> list[str]:
    """Load the plugins; the one-line messages of the ``PluginWarning``s raised while doing so."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plugins.get_registry()
    lines = [
        warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line)
        for w in caught
        if issubclass(w.category, plugins.PluginWarning)
    ]
    assert all(line.count("\n") == 1 for line in lines), lines  # one line each
    return [str(w.message) for w in caught if issubclass(w.category, plugins.PluginWarning)]


def info(name: str) -> plugins.PluginInfo:
    return next(p for p in plugins.plugins() if p.name == name)


def assert_builtins_work() -> None:
    torch.manual_seed(0)
    model = zoo.build("gpt-tiny")
    x = torch.randint(0, 256, (2, 8))
    assert torch.isfinite(model(x, labels=x).loss)


def recipe_error(**components: Any) -> str:
    with pytest.raises(zoo.RecipeError) as caught:
        zoo.load_recipe({**zoo.load_recipe("gpt-tiny").to_dict(), **components})
    return str(caught.value)


@zoo.hookimpl
def _register_halfnorm(register):
    register("norm", "halfnorm", HalfNorm, norm_config("halfnorm"))


GOOD = plugin_module("zoo_test_good", ZOO_PLUGIN_API=1, register_components=_register_halfnorm)


# ---------------------------------------------------------------------------------------------- loading


def test_an_installed_plugin_loads_through_its_entry_point(installed):
    installed(("zoo-good", GOOD))
    assert load() == []
    component = zoo.get_registry().get("norm", "halfnorm")
    assert component.plugin == "zoo-good"
    assert component.description == HalfNorm.__doc__.splitlines()[0]
    good = info("zoo-good")
    assert (good.status, good.api, good.registered, good.builtin) == ("ok", 1, {"norm": ["halfnorm"]}, False)
    model = zoo.build("gpt-tiny", norm="halfnorm")
    assert model.zoo_components["blocks.0.ffn_norm"].plugin == "zoo-good"


def test_builtins_are_listed_first_with_what_they_registered(installed):
    installed(("zoo-good", GOOD))
    listed = plugins.plugins()
    assert [p.name for p in listed][-1] == "zoo-good"
    assert all(p.builtin for p in listed[:-1]) and listed[0].version == zoo.__version__
    assert {"mha", "gqa", "mqa", "moa"} <= set(info("zoo.components.attention").registered["attention"])
    assert {"gpt-tiny", "llama-tiny", "bert-tiny"} <= set(info("zoo.architectures").recipes)


def test_plugin_api_version_is_public():
    assert zoo.PLUGIN_API_VERSION == plugins.PLUGIN_API_VERSION == zoo.hookspecs.PLUGIN_API_VERSION == 1


# ---------------------------------------------------------------------------------------------- broken plugins


def test_a_plugin_that_fails_to_import_is_reported_and_the_rest_works(installed, tmp_path, monkeypatch):
    (tmp_path / "zoo_test_broken.py").write_text(f"import {MISSING}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    installed(("zoo-broken", "zoo_test_broken"), ("zoo-good", GOOD))
    error = f"ModuleNotFoundError: No module named '{MISSING}'"
    assert load() == [f"plugin 'zoo-broken' failed and was skipped: {error}"]
    broken = info("zoo-broken")
    assert (broken.status, broken.error, broken.registered) == ("failed", error, {})
    assert plugins.failures() == [broken]
    assert info("zoo-good").ok
    assert_builtins_work()
    # Nobody can know what a plugin that never imported would have registered: an unknown name lists it.
    # The names are whatever is registered now (the built-ins named here among them), sorted.
    registered = sorted(zoo.get_registry().names("attention"))
    assert {"gqa", "mha", "mqa"} <= set(registered) and "sliding_window" not in registered
    assert recipe_error(attention={"type": "sliding_window", "num_heads": 4}) == (
        f"attention.type: unknown attention type 'sliding_window'; registered: {', '.join(registered)}; "
        f"plugins that failed to load: zoo-broken ({error})"
    )


def test_a_raising_hook_is_rolled_back_and_its_names_explain_themselves(installed):
    @zoo.hookimpl
    def register_components(register):
        register("norm", "halfnorm", HalfNorm, norm_config("halfnorm"))
        raise RuntimeError("boom")

    installed(("zoo-raises", plugin_module("zoo_test_raises", register_components=register_components)))
    error = "register_components raised RuntimeError: boom"
    assert load() == [f"plugin 'zoo-raises' failed and was skipped: {error}"]
    assert "halfnorm" not in zoo.get_registry().names("norm")  # registered before the raise, rolled back
    assert info("zoo-raises").provides == {"norm": ["halfnorm"]}
    assert_builtins_work()
    assert recipe_error(norm="halfnorm") == (
        f"norm.type: norm type 'halfnorm' is not available: plugin 'zoo-raises' failed to load: {error}"
    )


def test_a_duplicate_name_fails_the_later_plugin_whole_naming_both(installed):
    @zoo.hookimpl
    def register_components(register):
        register("norm", "halfnorm", HalfNorm, norm_config("halfnorm"))
        register("attention", "gqa", HalfNorm, norm_config("gqa"))

    installed(("zoo-dup", plugin_module("zoo_test_dup", register_components=register_components)))
    error = "attention 'gqa' is registered twice: by plugin 'zoo.components.attention' and by plugin 'zoo-dup'"
    assert load() == [f"plugin 'zoo-dup' failed and was skipped: {error}"]
    assert zoo.get_registry().get("attention", "gqa").plugin == "zoo.components.attention"
    assert "halfnorm" not in zoo.get_registry().names("norm")
    assert_builtins_work()


def test_between_installed_plugins_the_first_by_entry_point_name_wins(installed):
    twin = plugin_module("zoo_test_twin", register_components=_register_halfnorm)
    # Listed in the other order: the rule does not depend on the order the environment reports them in.
    installed(("zoo-b", twin), ("zoo-a", GOOD))
    error = "norm 'halfnorm' is registered twice: by plugin 'zoo-a' and by plugin 'zoo-b'"
    assert load() == [f"plugin 'zoo-b' failed and was skipped: {error}"]
    assert zoo.get_registry().get("norm", "halfnorm").plugin == "zoo-a"
    assert [p.status for p in plugins.plugins() if not p.builtin] == ["ok", "failed"]


@pytest.mark.parametrize("declared", [2, "1", 0])
def test_an_incompatible_api_version_is_reported_without_calling_the_plugin(installed, declared):
    called = []

    @zoo.hookimpl
    def register_components(register):
        called.append(True)

    future = plugin_module("zoo_test_future", ZOO_PLUGIN_API=declared, register_components=register_components)
    installed(("zoo-future", future))
    error = f"declares plugin API version {declared!r}; this zoo provides version 1"
    assert load() == [f"plugin 'zoo-future' failed and was skipped: {error}"]
    assert called == [] and info("zoo-future").api == declared
    assert_builtins_work()
    assert recipe_error(norm="halfnorm").endswith(f"; plugins that failed to load: zoo-future ({error})")


def test_a_misspelt_hook_is_an_error_but_an_optional_one_is_not(installed):
    @zoo.hookimpl
    def register_component(register):  # missing "s": would silently do nothing
        pass

    @zoo.hookimpl(optionalhook=True)
    def register_exporters(register):  # a hook of some later zoo, marked optional
        pass

    installed(
        ("zoo-typo", plugin_module("zoo_test_typo", register_component=register_component)),
        ("zoo-later", plugin_module("zoo_test_later", register_exporters=register_exporters)),
    )
    error = (
        "implements unknown hook 'register_component'; "
        "the hooks of plugin API 1 are: register_accelerators, register_components, register_hf_families, "
        "register_recipes"
    )
    assert load() == [f"plugin 'zoo-typo' failed and was skipped: {error}"]
    assert info("zoo-later").ok


def test_a_hook_with_arguments_the_spec_lacks_is_reported(installed):
    @zoo.hookimpl
    def register_components(register, zoo_version):
        pass

    installed(("zoo-args", plugin_module("zoo_test_args", register_components=register_components)))
    (message,) = load()
    assert message.startswith("plugin 'zoo-args' failed and was skipped: PluginValidationError: ")
    assert "zoo_version" in message
    assert_builtins_work()


# ---------------------------------------------------------------------------------------------- recipes


def test_shipped_recipes_are_named_and_follow_the_same_collision_rule(installed, tmp_path):
    shipped = tmp_path / "recipes"
    shipped.mkdir()
    (shipped / "half-tiny.yaml").write_text("extends: gpt-tiny\nname: half-tiny\nnorm: halfnorm\n")
    clashing = tmp_path / "clash"
    clashing.mkdir()
    (clashing / "gpt-tiny.yaml").write_text("name: gpt-tiny\n")

    @zoo.hookimpl
    def register_recipes():
        return [shipped]

    @zoo.hookimpl
    def register_clashing_recipes():
        return [clashing]

    good = plugin_module("zoo_test_shipping", register_components=_register_halfnorm, register_recipes=register_recipes)
    clash = plugin_module("zoo_test_clash", register_recipes=register_clashing_recipes)
    installed(("zoo-shipping", good), ("zoo-clash", clash))
    error = "recipe 'gpt-tiny' is shipped twice: by plugin 'zoo.architectures' and by plugin 'zoo-clash'"
    assert load() == [f"plugin 'zoo-clash' failed and was skipped: {error}"]
    assert info("zoo-shipping").recipes == ["half-tiny"]
    assert zoo.load_recipe("half-tiny").norm.type == "halfnorm"
    assert zoo.load_recipe("gpt-tiny").norm.type == "layernorm"
    assert clashing not in plugins.recipe_paths()


def test_a_missing_recipe_path_is_reported(installed, tmp_path):
    @zoo.hookimpl
    def register_recipes():
        return [tmp_path / "nowhere"]

    installed(("zoo-lost", plugin_module("zoo_test_lost", register_recipes=register_recipes)))
    assert load() == [
        f"plugin 'zoo-lost' failed and was skipped: register_recipes returned '{tmp_path / 'nowhere'}', "
        "which is not a file or directory"
    ]


# ---------------------------------------------------------------------------------------------- switches


def test_strict_mode_turns_a_failure_into_an_error(installed, monkeypatch, tmp_path):
    (tmp_path / "zoo_test_strict.py").write_text(f"import {MISSING}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    installed(("zoo-broken", "zoo_test_strict"))
    monkeypatch.setenv("ZOO_STRICT_PLUGINS", "1")
    message = (
        f"plugin 'zoo-broken' failed: ModuleNotFoundError: No module named '{MISSING}' (ZOO_STRICT_PLUGINS is set)"
    )
    with pytest.raises(zoo.PluginError, match=re.escape(message)):
        zoo.build("gpt-tiny")
    with pytest.raises(zoo.PluginError, match=re.escape(message)):  # not half-loaded: it fails again
        plugins.get_registry()
    monkeypatch.setenv("ZOO_STRICT_PLUGINS", "0")
    assert load() == [f"plugin 'zoo-broken' failed and was skipped: ModuleNotFoundError: No module named '{MISSING}'"]
    assert_builtins_work()


def test_strict_mode_also_covers_run_time_registration(installed, monkeypatch):
    installed()
    monkeypatch.setenv("ZOO_STRICT_PLUGINS", "yes")

    class Raises:
        @zoo.hookimpl
        def register_components(self, register):
            raise KeyError("x")

    with pytest.raises(zoo.PluginError, match=r"^plugin 'raises' failed: register_components raised KeyError: 'x'"):
        plugins.register_plugin(Raises(), "raises")
    assert "raises" not in zoo.get_registry().names("norm")


@pytest.mark.parametrize("names", ["zoo-broken", " Zoo_Broken ,other", "zoo.broken"])
def test_disabled_plugins_are_not_even_imported(installed, monkeypatch, tmp_path, names):
    (tmp_path / "zoo_test_disabled.py").write_text(f"import {MISSING}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    installed(("zoo-broken", "zoo_test_disabled"), ("zoo-good", GOOD))
    monkeypatch.setenv("ZOO_DISABLE_PLUGINS", names)
    assert load() == []
    assert "zoo_test_disabled" not in sys.modules
    disabled = info("zoo-broken")
    assert (disabled.status, disabled.error, disabled.ok) == ("disabled", None, False)
    assert plugins.failures() == []
    assert recipe_error(norm="nonorm").endswith("; disabled plugins: zoo-broken")


def test_run_time_registration_reports_like_installation(installed, register_plugin):
    installed()

    class Dup:
        @zoo.hookimpl
        def register_components(self, register):
            register("norm", "layernorm", HalfNorm, norm_config("layernorm"))

    with pytest.warns(plugins.PluginWarning, match="norm 'layernorm' is registered twice"):
        result = register_plugin(Dup(), "dup")
    assert result.status == "failed" and info("dup").error.startswith("norm 'layernorm' is registered twice")
    with pytest.warns(plugins.PluginWarning, match="the plugin name 'dup' is already taken"):
        register_plugin(Dup(), "dup")
    assert_builtins_work()


# ---------------------------------------------------------------------------------------------- the guide


def guide_files(markdown: str) -> dict[str, str]:
    """The fenced blocks of the guide annotated with ``title="path"``: the files of the example plugin."""
    blocks = re.findall(r'^```\w*\s+title="([^"]+)"\n(.*?)^```$', markdown, flags=re.M | re.S)
    return dict(blocks)


@pytest.mark.slow
def test_the_guides_minimal_plugin_installs_and_builds(tmp_path):
    files = guide_files((ROOT / "docs" / "writing-a-plugin.md").read_text(encoding="utf-8"))
    assert set(files) == {
        "zoo-scalenorm/pyproject.toml",
        "zoo-scalenorm/zoo_scalenorm.py",
        "zoo-scalenorm/test_scalenorm.py",
        "scalenorm-tiny.yaml",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    # Installed into a folder of its own, not the environment: other test processes (pytest-xdist workers, or
    # another run) never see the plugin appear and disappear.
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    install = [*pip, "install", "--no-build-isolation", "--no-deps", "--no-index", "--target", str(site)]
    subprocess.run([*install, "./zoo-scalenorm"], cwd=tmp_path, check=True, capture_output=True)
    # Fresh interpreters that see the folder, so that the new entry point is read; strict, so that a failing
    # plugin fails here.
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "ZOO_STRICT_PLUGINS": "1", "COLUMNS": "200"}
    script = (
        "import torch, zoo\n"
        "model = zoo.build('scalenorm-tiny.yaml')\n"
        "x = torch.randint(0, 256, (2, 8))\n"
        "assert torch.isfinite(model(x, labels=x).loss)\n"
        "print(type(model.blocks[0].attention_norm).__name__, model.zoo_components['final_norm'].plugin)\n"
        "print([(p.status, p.version, p.registered) for p in zoo.plugins.plugins() if p.name == 'zoo-scalenorm'])\n"
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["ScaleNorm zoo-scalenorm", "[('ok', '0.1.0', {'norm': ['scalenorm']})]"]
    cli = "import sys; from zoo.cli import main; sys.argv[0] = 'zoo'; main()"
    listed = subprocess.run([sys.executable, "-c", cli, "list", "norm"], env=env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"scalenorm\s+\(zoo-scalenorm 0\.1\.0\)\s+ScaleNorm: the input divided by", listed.stdout)
    # The plugin's three-line test file runs zoo's whole contract suite on ScaleNorm, and passes.
    tests = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "zoo-scalenorm"]
    ran = subprocess.run(tests, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert re.search(r"^\d+ passed", ran.stdout.splitlines()[-1]), ran.stdout[-500:]


def test_a_slow_plugin_import_is_named_with_its_time(installed, monkeypatch):
    monkeypatch.setattr(plugins, "SLOW_IMPORT_S", -1.0)  # every import counts as slow here
    installed(("zoo-good", GOOD))
    messages = load()
    slow = [m for m in messages if m.startswith("plugin 'zoo-good' took ")]
    assert slow and slow[0].endswith(" s to import, which every zoo command waits for")
    assert info("zoo-good").status == "ok"
