"""Layer kinds: a decoder whose layers are of a few kinds (sliding or full, RoPE or NoPE, chunked), as per-layer
lists of its config name them (``layer_types``, ``no_rope_layers``). A family declares each list as an ``Axis`` (its
values' changes to a layer's attention, the value of a layer on export, the list a config that omits it implies);
``layer_kinds`` makes of them the one row that reads, writes and requires the layers::

    layer_kinds(
        layer_types=Axis({SLIDING: slides, FULL: nope}, fill=every_nth(FULL, SLIDING)),
        keys={"sliding_window": 4096, "layer_types": None, "sliding_window_pattern": 4},
        fields=("window", "rotary"),  # the attention fields the kinds change (these, by default)
        shared={"sliding_window": "window"},  # one value for every layer that has the field (this, by default)
    )

Each layer's attention is the recipe's with the changes of its values on every axis: changes every layer shares go
on the recipe's attention, the others become ``layers:`` overrides (``rows.per_layer_attention``). On export the
lists are written back from each layer's attention, and ``layers:`` overrides may change only the kinds' fields.
What a family's kinds must be beyond that (which kind rotates, one window) is its own ``requires``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .mapping import Option, Requirement
from .rope import hf_rope_parameters
from .rows import layer_attentions, only_attention_differs, per_layer_attention, uses_rope
from .table import Computed

SLIDING, FULL = "sliding_attention", "full_attention"
"""transformers' ``layer_types`` of a sliding-window layer and of one that sees every key."""

Change = Callable[[dict[str, Any]], dict[str, Any]]
"""The attention fields a kind of layer sets, from the config (its window, its chunk size, ...)."""


def same(config: dict[str, Any]) -> dict[str, Any]:
    """The change of a kind that is the recipe's attention as it is."""
    return {}


def nope(config: dict[str, Any]) -> dict[str, Any]:
    """The change of a NoPE layer: no position encoding at all."""
    return {"rotary": {"type": "none"}}


def sliding_or_full(attention: Any) -> str:
    """A layer's ``layer_types`` entry: sliding where it has a window."""
    return FULL if attention.window is None else SLIDING


@dataclass(frozen=True)
class Axis:
    """One per-layer list of the config: ``kinds`` maps each value to its change of the layer's attention;
    ``fill(config, lists read so far)`` is the list of a config that omits it; ``of`` gives a layer's value on
    export (from its attention: by default its ``layer_types`` entry, sliding or full); ``kind`` names the kind a
    listed value means (identity: a value not in ``kinds`` fails)."""

    kinds: Mapping[Any, Change]
    fill: Callable[[dict[str, Any], dict[str, list[Any]]], list[Any]]
    of: Callable[[Any], Any] = sliding_or_full
    kind: Callable[[Any], Any] = lambda value: value


def slides(config: dict[str, Any]) -> dict[str, Any]:
    """The change of a sliding layer: the window ``sliding_window``."""
    return {"window": config["sliding_window"]}


def windowed(change: Change, without: Change) -> Change:
    """``change`` where the config has a ``sliding_window``, ``without`` where it has none."""
    return lambda config: without(config) if config["sliding_window"] is None else change(config)


def full_unless_sliding(value: Any) -> str:
    """The kind of a ``layer_types`` entry where transformers treats every entry but ``sliding_attention`` as full."""
    return SLIDING if value == SLIDING else FULL


def sliding_types(kinds: Mapping[str, Change], fill: Callable[..., list[str]]) -> Axis:
    """A ``layer_types`` axis of sliding and full layers, where every entry but ``sliding_attention`` means full."""
    return Axis(kinds, fill, kind=full_unless_sliding)


def rope_every(config: dict[str, Any], lists: dict[str, list[Any]]) -> list[int]:
    """``no_rope_layers`` as SmolLM3's and Llama 4's configs fill it: every ``no_rope_layer_interval``-th NoPE."""
    interval = config["no_rope_layer_interval"]
    return [int((i + 1) % interval != 0) for i in range(config["num_hidden_layers"])]


def rope_or_nope(rope: Change = same, nope: Change = nope) -> Axis:
    """A ``no_rope_layers`` axis (SmolLM3, Llama 4): 1 (any true value) a RoPE layer, 0 a NoPE one."""
    return Axis({1: rope, 0: nope}, rope_every, of=lambda a: int(uses_rope(a)), kind=lambda v: int(bool(v)))


def used_window(config: dict[str, Any]) -> int | None:
    """The window of a config with a ``use_sliding_window`` switch (Qwen2's, SmolLM3's): None where it is off."""
    return config["sliding_window"] if config["use_sliding_window"] else None


def every_nth(nth: str, other: str, pattern: str | int = "sliding_window_pattern") -> Callable[..., list[str]]:
    """A ``fill``: every ``pattern``-th layer (a number, or the config key that holds it) ``nth``, the others
    ``other``."""

    def fill(config: dict[str, Any], lists: dict[str, list[Any]]) -> list[str]:
        every = pattern if isinstance(pattern, int) else config[pattern]
        return [nth if (i + 1) % every == 0 else other for i in range(config["num_hidden_layers"])]

    return fill


def hf_kind_ropes(recipe: Any) -> dict[str, dict[str, Any]]:
    """``rope_parameters`` with a rope of each kind (OLMo 3, Gemma 3): its layers' ``rotary``, else the stack's
    rope (the stack's too for a kind no layer has)."""
    ropes = dict.fromkeys((SLIDING, FULL), recipe.positional)
    for attention in layer_attentions(recipe):
        ropes[sliding_or_full(attention)] = attention.rotary or recipe.positional
    return {kind: hf_rope_parameters(rope) for kind, rope in ropes.items()}


def full_rotation_per_kind(why: str) -> tuple[Option, ...]:
    """The refusal of a partial rotation in the rope parameters of either kind (nested ``rope_parameters``)."""
    return tuple(
        Option(f"rope_parameters.{kind}.partial_rotary_factor", lambda v: v in (None, 1.0), why)
        for kind in (SLIDING, FULL)
    )


def layer_kinds(
    *,
    keys: Mapping[str, Any],
    fields: tuple[str, ...] = ("window", "rotary"),
    shared: Mapping[str, str] = {"sliding_window": "window"},
    requires: Mapping[str, Requirement] = {},
    more: Callable[[Any, list[Any]], dict[str, Any]] = lambda recipe, attentions: {},
    legacy: tuple[str, ...] = (),
    **axes: Axis,
) -> Computed:
    """The ``layers`` row of a family with the kinds of layer ``axes`` declare (by config key, in the order they
    fill in), which change the attention's
    ``fields``. ``shared`` config keys are written
    as the first non-None value of an attention field across the layers (``{"sliding_window": "window"}``);
    ``more(recipe, attentions)`` adds the keys the family writes beside them. One list has a layer per entry (a
    list of another length fails as the model is built); several are read for ``num_hidden_layers`` layers."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        lists: dict[str, list[Any]] = {}
        for key, axis in axes.items():
            lists[key] = config[key] or axis.fill(config, lists)
        n = len(lists[next(iter(axes))]) if len(axes) == 1 else config["num_hidden_layers"]
        changes = [
            {f: v for key, axis in axes.items() for f, v in axis.kinds[axis.kind(lists[key][i])](config).items()}
            for i in range(n)
        ]
        return per_layer_attention(recipe, changes)

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        attentions = layer_attentions(recipe)
        out = {key: [axis.of(a) for a in attentions] for key, axis in axes.items()}
        for key, name in shared.items():
            out[key] = next((getattr(a, name) for a in attentions if getattr(a, name) is not None), None)
        return {**out, **more(recipe, attentions)}

    return Computed(
        "layers",
        keys=keys,
        paths=(*(f"attention.{f}" for f in fields), "layers"),
        read=read,
        write=write,
        requires={"layers": only_attention_differs(*fields), **requires},
        legacy=legacy,
        last=True,  # its overrides copy the attention as the other rows made it
    )
