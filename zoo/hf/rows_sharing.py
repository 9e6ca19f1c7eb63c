"""Cross-layer weight sharing (zoo's ``layer_groups``) as a config says it: the key of the number of groups, and the
binding that names a zoo layer's weights by its group (``Rule(..., bind=weight_group)``): ALBERT's."""

from dataclasses import replace
from typing import Any

from zoo.errors import HFImportError

from .mapping import Rule
from .table import Computed


def weight_group(recipe: Any, fields: dict[str, str]) -> dict[str, str]:
    """A rule's fields with ``{g}``, the group of zoo's layer ``{i}`` (consecutive groups of equal size)."""
    return {**fields, "g": str(recipe.layer_group("encoder", int(fields["i"])))}


def grouped(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """``rules`` of a layer (``blocks.{i}``) whose HF names are its group's (``{g}``)."""
    return tuple(replace(rule, bind=weight_group) for rule in rules)


def layer_groups(key: str, inner: str, layers: str = "num_hidden_layers") -> Computed:
    """The number of groups of layers that share weights, ``key`` (as many as the ``layers``: none shared), and
    ``inner``, the layers each group holds, which is 1 in zoo (a group's layers are one layer applied again)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        n, groups = config[layers], config[key]
        if config[inner] != 1:
            raise HFImportError(f"{inner}={config[inner]!r} is not supported: zoo's groups are one layer each")
        if not isinstance(groups, int) or groups < 1 or n % groups:
            raise HFImportError(f"{key}={groups!r} must split {layers} ({n}) into groups of equal size")
        return {"layer_groups": groups} if groups != n else {}

    return Computed(
        "layer groups",
        keys={key: 1, inner: 1},
        paths=("layer_groups",),
        read=read,
        write=lambda recipe, weights: {key: recipe.layer_groups or recipe.num_layers, inner: 1},
    )
