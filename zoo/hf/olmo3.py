"""OLMo 3 (``Olmo3ForCausalLM``): OLMo 2's network in which ``sliding_attention`` layers (three in four by default)
slide over ``sliding_window`` keys, each kind of layer with its own RoPE (4.x ``rope_theta`` and ``rope_scaling``:
the full layers'). The sliding layers' rope is the recipe's; full layers with another carry it as their ``rotary``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import layer_kinds as kinds
from .layer_kinds import FULL, SLIDING
from .olmo2 import OLMO2
from .rows import ROPE, layer_attentions

THETA = 500000.0  # Olmo3Config.default_theta, which the sliding layers keep


def ropes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The zoo rope of each kind of layer, as ``Olmo3Config.convert_rope_params_to_dict`` assembles them."""
    return kinds.kind_ropes(config, {SLIDING: THETA, FULL: config["rope_theta"] or THETA}, flat=True)


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
        return "a sliding layer has its own rotary; OLMo 3's sliding layers use the stack's rope"
    if len({repr(a.rotary) for a in attentions if a.window is None}) > 1:
        return "the full layers' ropes differ; OLMo 3 has one rope per kind of layer"
    return None


def hf_ropes(recipe: Any, attentions: list[Any]) -> dict[str, Any]:
    """The rope of each kind, and transformers 4's ``rope_theta`` (the full layers')."""
    per_kind = kinds.hf_kind_ropes(recipe)
    return {"rope_parameters": per_kind, "rope_theta": per_kind[FULL]["rope_theta"]}


OLMO3 = OLMO2.derive(
    "olmo3",
    classes=("Olmo3ForCausalLM",),
    recipes=("olmo-3-7b",),
    drop=("rope", "layers", "rope_parameters.partial_rotary_factor"),
    rows=(
        *kinds.rope_options_per_kind("OLMo 3 rotates every head dim"),
        replace(  # the sliding layers' rope; the layers row writes every kind's
            ROPE,
            keys={**ROPE.keys, "rope_theta": None},
            read=lambda config, recipe: {"positional": ropes(config)[SLIDING]},
            write=lambda recipe, weights: {},
            legacy=("rope_theta", "rope_parameters", "rope_scaling"),
        ),
        kinds.layer_kinds(
            layer_types=kinds.Axis({SLIDING: kinds.slides, FULL: full_rope}, fill=kinds.every_nth(FULL, SLIDING, 4)),
            keys={"sliding_window": 4096, "layer_types": None},
            requires={"attention.rotary": one_rope_per_kind},
            more=hf_ropes,
        ),
    ),
)
