"""The registry: built-ins arrive through the plugin hooks, names are unique, lookups explain themselves."""

from __future__ import annotations

from typing import Literal

import pytest
import torch
from torch import nn

import zoo
from zoo.config import ComponentConfig
from zoo.registry import KINDS, Registry

BUILTINS = {
    "architecture": {"decoder", "encoder", "encoder-decoder", "vit"},
    "embedding": {"token", "patch"},
    "positional": {"sinusoidal", "learned", "rope", "alibi", "t5_relative", "none"},
    "attention": {"mha", "gqa", "mqa", "moa"},
    "norm": {"layernorm", "rmsnorm"},
    "ffn": {"mlp", "swiglu", "geglu", "reglu", "moe"},
    "head": {"lm", "mlm", "classification", "pooler"},
}


class ScaleNormConfig(ComponentConfig):
    type: Literal["scalenorm"] = "scalenorm"
    eps: float = 1e-5


class ScaleNorm(nn.Module):
    """Scale the vector to unit norm times one learned scalar."""

    def __init__(self, d_model: int, *, eps: float = 1e-5) -> None:
        super().__init__()
        self.g = nn.Parameter(torch.ones(1))
        self.eps = eps

    def forward(self, x):
        return self.g * x / x.norm(dim=-1, keepdim=True).clamp(min=self.eps)


def test_builtins_are_registered_through_the_hooks():
    registry = zoo.get_registry()
    for kind, names in BUILTINS.items():
        assert names <= set(registry.names(kind)), kind
    plugins = {c.plugin for c in registry if c.name in BUILTINS.get(c.kind, set())}
    assert all(p.startswith("zoo.") for p in plugins)
    for component in registry:
        assert component.description, f"{component.kind} {component.name} has no description"
        assert component.kind in KINDS


def test_a_plugin_registers_a_component_used_by_a_recipe(register_plugin):
    class Plugin:
        @zoo.hookimpl
        def register_components(self, register):
            register("norm", "scalenorm", ScaleNorm, ScaleNormConfig)

    register_plugin(Plugin(), "scalenorm-plugin")
    component = zoo.get_registry().get("norm", "scalenorm")
    assert component.plugin == "scalenorm-plugin"
    assert component.description == "Scale the vector to unit norm times one learned scalar."
    model = zoo.build("gpt-tiny", norm={"type": "scalenorm"})
    assert isinstance(model.blocks[0].attention_norm, ScaleNorm)
    assert model.zoo_components["final_norm"].plugin == "scalenorm-plugin"


def test_unregistered_plugin_is_gone(register_plugin):
    class Plugin:
        @zoo.hookimpl
        def register_components(self, register):
            register("norm", "scalenorm", ScaleNorm, ScaleNormConfig)

    register_plugin(Plugin(), "scalenorm-plugin")
    zoo.plugins.unregister_plugin("scalenorm-plugin")
    with pytest.raises(zoo.UnknownComponentError, match="unknown norm type 'scalenorm'"):
        zoo.get_registry().get("norm", "scalenorm")


def test_duplicate_name_is_an_error_naming_both_plugins():
    registry = Registry()
    registry.add("norm", "scalenorm", ScaleNorm, ScaleNormConfig, plugin="first")
    with pytest.raises(
        zoo.PluginError, match="norm 'scalenorm' is registered twice: by plugin 'first' and by plugin 'second'"
    ):
        registry.add("norm", "scalenorm", ScaleNorm, ScaleNormConfig, plugin="second")
    assert registry.get("norm", "scalenorm").plugin == "first"


def test_registration_is_checked():
    registry = Registry()
    with pytest.raises(zoo.PluginError, match="unknown kind 'mixer'; kinds are: architecture, embedding"):
        registry.add("mixer", "x", ScaleNorm, ScaleNormConfig, plugin="p")
    with pytest.raises(zoo.PluginError, match=r"needs a field `type: Literal\['other'\] = 'other'`"):
        registry.add("norm", "other", ScaleNorm, ScaleNormConfig, plugin="p")
    with pytest.raises(zoo.PluginError, match="must be a pydantic BaseModel class"):
        registry.add("norm", "scalenorm", ScaleNorm, dict, plugin="p")


def test_lookup_suggests_the_closest_name():
    with pytest.raises(
        zoo.UnknownComponentError, match=r"unknown ffn type 'swiglue' \(did you mean 'swiglu'\?\); registered:"
    ):
        zoo.get_registry().get("ffn", "swiglue")
    with pytest.raises(zoo.UnknownComponentError, match="unknown component kind 'ffns'"):
        zoo.get_registry().get("ffns", "mlp")


def test_components_lists_by_kind():
    names = {c.name for c in zoo.list_components("attention")}
    assert BUILTINS["attention"] <= names
    assert len(zoo.list_components()) >= sum(len(v) for v in BUILTINS.values())
