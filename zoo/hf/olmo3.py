"""OLMo 3 (``Olmo3ForCausalLM``): OLMo 2's network in which ``sliding_attention`` layers (three in four by default)
slide over ``sliding_window`` keys, and each kind of layer has its own RoPE (``rope_parameters`` per layer type;
a 4.x ``rope_theta`` and ``rope_scaling`` apply to the full layers, the sliding ones keep Olmo3Config's base). In a
zoo recipe the sliding layers' rope is the stack's; full layers with another rope carry it as ``attention.rotary``."""

from __future__ import annotations

from typing import Any

from .layer_kinds import FULL, SLIDING, Axis, every_nth, hf_kind_ropes, layer_kinds, rope_options_per_kind, slides
from .olmo2 import OLMO2
from .rope import rope_spec, scaling_fits
from .rows import layer_attentions
from .table import Computed

KINDS = (SLIDING, FULL)
THETA = 500000.0  # Olmo3Config.default_theta


def kind_ropes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The zoo rope of each kind of layer, as ``Olmo3Config.convert_rope_params_to_dict`` assembles them."""
    given = config["rope_parameters"] or {}
    if given and not set(given) <= set(KINDS):  # one set of parameters for both kinds
        given = dict.fromkeys(KINDS, given)
    params = {kind: dict(given.get(kind) or {"rope_type": "default"}) for kind in KINDS}
    if config["rope_scaling"]:
        params[FULL].update(config["rope_scaling"])
    params[FULL].setdefault("rope_theta", config["rope_theta"] or THETA)
    params[SLIDING].setdefault("rope_theta", THETA)  # transformers pops rope_theta for the full kind
    return {kind: rope_spec(config, p) for kind, p in params.items()}


def full_rope(config: dict[str, Any]) -> dict[str, Any]:
    """The change of a full layer: its own rotary where its rope is not the sliding layers' (the stack's)."""
    ropes = kind_ropes(config)
    return {} if ropes[FULL] == ropes[SLIDING] else {"rotary": ropes[FULL]}


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
    ropes = hf_kind_ropes(recipe)
    return {"rope_parameters": ropes, "rope_theta": ropes[FULL]["rope_theta"]}


OLMO3 = OLMO2.derive(
    "olmo3",
    classes=("Olmo3ForCausalLM",),
    recipes=("olmo-3-7b",),
    drop=("rope", "layers", "rope_parameters.partial_rotary_factor"),
    rows=(
        *rope_options_per_kind("OLMo 3 rotates every head dim"),
        Computed(
            "rope",
            keys={"rope_theta": None, "rope_parameters": None, "rope_scaling": None},
            paths=("positional.*",),
            read=lambda config, recipe: {"positional": kind_ropes(config)[SLIDING]},
            write=lambda recipe, weights: {},  # with the layers, below
            requires={
                "positional.type": "rope",
                "positional.scaling": scaling_fits,
                "positional.interleaved": False,
                "positional.rotary_fraction": 1.0,
            },
            legacy=("rope_theta", "rope_parameters", "rope_scaling"),
        ),
        layer_kinds(
            layer_types=Axis({SLIDING: slides, FULL: full_rope}, fill=every_nth(FULL, SLIDING, 4)),
            keys={"sliding_window": 4096, "layer_types": None},
            requires={"attention.rotary": one_rope_per_kind},
            more=hf_ropes,
        ),
    ),
)
