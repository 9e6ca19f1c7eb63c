"""Rows of sliding and full layers (``layer_kinds.py``) that families share beyond the kinds themselves: a rope per
kind of layer (OLMo 3), sliding RoPE layers beside full NoPE ones (EXAONE 4), and the layer types of a config that
gives a pattern instead."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from zoo.errors import HFImportError

from .layer_kinds import FULL, SLIDING, Axis, hf_kind_ropes, kind_ropes, layer_kinds, rope_options_per_kind, slides
from .mapping import Requirement
from .rows import ROPE, layer_attentions, uses_rope
from .table import Row


def rope_per_kind(
    family: str,
    bases: Callable[[dict[str, Any]], dict[str, float]],
    *,
    fill: Callable[..., list[str]],
    keys: dict[str, Any],
    theta: float | None,
    why: str,
) -> tuple[Row, ...]:
    """Sliding and full layers (``layer_types``, else ``fill``), each kind with its own RoPE, and the refusals of a
    partial rotation in either (``why``). Each kind's rope is read by ``layer_kinds.kind_ropes`` (parameters not
    nested by kind are both kinds'), of base ``bases(config)[kind]`` where they give none; 4.x ``rope_theta``
    (default ``theta``) and ``rope_scaling`` are the full layers'. The sliding layers' rope is the recipe's, full
    layers with another carry it as their ``rotary``. ``keys``: the layers row's (see ``layer_kinds``)."""

    def ropes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return kind_ropes(config, bases(config), flat=True)

    def full_rope(config: dict[str, Any]) -> dict[str, Any]:
        """The change of a full layer: its own rotary where its rope is not the sliding layers' (the stack's)."""
        per_kind = ropes(config)
        return {} if per_kind[FULL] == per_kind[SLIDING] else {"rotary": per_kind[FULL]}

    def one_rope_per_kind(recipe: Any) -> str | None:
        """A requirement: sliding layers share one window and the stack's rope; full layers share one rope."""
        attentions = layer_attentions(recipe)
        sliding = [a for a in attentions if a.window is not None]
        if len({a.window for a in sliding}) > 1:
            return "the layers' windows differ; a sliding_window is one value"
        if any(a.rotary is not None for a in sliding):
            return f"a sliding layer has its own rotary; {family}'s sliding layers use the stack's rope"
        if len({repr(a.rotary) for a in attentions if a.window is None}) > 1:
            return f"the full layers' ropes differ; {family} has one rope per kind of layer"
        return None

    def hf_ropes(recipe: Any, attentions: list[Any]) -> dict[str, Any]:
        """The rope of each kind, and transformers 4's ``rope_theta`` (the full layers')."""
        per_kind = hf_kind_ropes(recipe)
        return {"rope_parameters": per_kind, "rope_theta": per_kind[FULL]["rope_theta"]}

    return (
        *rope_options_per_kind(why),
        replace(  # the sliding layers' rope; the layers row writes every kind's
            ROPE,
            keys={**ROPE.keys, "rope_theta": theta},
            read=lambda config, recipe: {"positional": ropes(config)[SLIDING]},
            write=lambda recipe, weights: {},
            legacy=("rope_theta", "rope_parameters", "rope_scaling"),
        ),
        layer_kinds(
            layer_types=Axis({SLIDING: slides, FULL: full_rope}, fill=fill),
            keys=keys,
            requires={"attention.rotary": one_rope_per_kind},
            more=hf_ropes,
        ),
    )


def windowed_pattern(config_class: str) -> Callable[..., list[str]]:
    """A ``fill``: every ``sliding_window_pattern``-th layer full, the others sliding, and every layer full where the
    config has no ``sliding_window`` (as ``config_class``, Exaone4Config, derives them); a pattern that is no integer
    is refused."""

    def fill(config: dict[str, Any], lists: dict[str, list[Any]]) -> list[str]:
        pattern = config["sliding_window_pattern"] if config["sliding_window"] is not None else 0
        if config["layer_types"] is None and not isinstance(pattern, int):
            raise HFImportError(
                f"sliding_window_pattern={pattern!r} without layer_types: {config_class} derives layer types from an "
                "integer pattern only (transformers cannot build this config either); give layer_types"
            )
        return [SLIDING if pattern and (i + 1) % pattern != 0 else FULL for i in range(config["num_hidden_layers"])]

    return fill


def sliding_rope_full_nope(family: str) -> Requirement:
    """A requirement: layers slide over one window with RoPE, or see every key without positions (NoPE) beside
    sliding layers; without sliding layers, every layer rotates (EXAONE 4)."""

    def check(recipe: Any) -> str | None:
        attentions = layer_attentions(recipe)
        windows = {a.window for a in attentions} - {None}
        if len(windows) > 1:
            return f"the layers' windows {sorted(windows)} differ; a sliding_window is one value"
        for i, a in enumerate(attentions):
            if a.window is not None and not uses_rope(a):
                return f"layer {i} slides without RoPE; {family}'s sliding layers rotate"
            if a.window is None and windows and uses_rope(a):
                return f"layer {i} sees every key with RoPE beside sliding layers; {family}'s full layers are NoPE"
            if not windows and not uses_rope(a):
                return f"layer {i} is NoPE without sliding layers; {family} then rotates every layer"
        return None

    return check
