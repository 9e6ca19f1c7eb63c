"""OLMo 3 (``Olmo3ForCausalLM``): OLMo 2's network in which ``sliding_attention`` layers (three in four by default)
slide over ``sliding_window`` keys, and each kind of layer has its own RoPE (``rope_parameters`` per layer type;
a 4.x ``rope_theta`` and ``rope_scaling`` apply to the full layers, the sliding ones keep Olmo3Config's base). In a
zoo recipe the sliding layers' rope is the stack's; full layers with another rope carry it as ``attention.rotary``.
"""

from __future__ import annotations

from typing import Any

from .olmo2 import OLMO2
from .rope import hf_rope_parameters, rope_spec, scaling_fits
from .rows import layer_attentions, only_attention_differs, per_layer_attention
from .table import Computed, Refused

KINDS = ("sliding_attention", "full_attention")
THETA = 500000.0  # Olmo3Config.default_theta


def kind_ropes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The zoo rope of each kind of layer, as ``Olmo3Config.convert_rope_params_to_dict`` assembles them."""
    given = config["rope_parameters"] or {}
    if given and not set(given) <= set(KINDS):  # one set of parameters for both kinds
        given = dict.fromkeys(KINDS, given)
    params = {kind: dict(given.get(kind) or {"rope_type": "default"}) for kind in KINDS}
    if config["rope_scaling"]:
        params["full_attention"].update(config["rope_scaling"])
    params["full_attention"].setdefault("rope_theta", config["rope_theta"] or THETA)
    params["sliding_attention"].setdefault("rope_theta", THETA)  # transformers pops rope_theta for the full kind
    return {kind: rope_spec(config, p) for kind, p in params.items()}


def layer_types(config: dict[str, Any]) -> list[str]:
    n = config["num_hidden_layers"]
    return config["layer_types"] or [KINDS[(i + 1) % 4 == 0] for i in range(n)]


def read_layers(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    ropes, window = kind_ropes(config), config["sliding_window"]
    changes = []
    for kind in layer_types(config):
        change: dict[str, Any] = {"window": window} if kind == "sliding_attention" else {}
        if ropes[kind] != ropes["sliding_attention"]:
            change["rotary"] = ropes[kind]
        changes.append(change)
    return per_layer_attention(recipe, changes)


def write_layers(recipe: Any, weights: Any) -> dict[str, Any]:
    attentions = layer_attentions(recipe)
    types = [KINDS[a.window is None] for a in attentions]
    ropes = dict.fromkeys(KINDS, recipe.positional)  # a kind no layer has: the stack's rope
    ropes.update((kind, a.rotary or recipe.positional) for kind, a in zip(types, attentions, strict=True))
    return {
        "sliding_window": next((a.window for a in attentions if a.window is not None), None),
        "layer_types": types,
        "rope_parameters": {kind: hf_rope_parameters(rope) for kind, rope in ropes.items()},
        "rope_theta": ropes["full_attention"].theta,
    }


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


OLMO3 = OLMO2.derive(
    "olmo3",
    classes=("Olmo3ForCausalLM",),
    recipes=("olmo-3-7b",),
    drop=("rope", "layers", "rope_parameters.partial_rotary_factor"),
    rows=(
        *(
            Refused(
                f"rope_parameters.{kind}.partial_rotary_factor",
                lambda v: v in (None, 1.0),
                "OLMo 3 rotates every head dim",
            )
            for kind in KINDS
        ),
        Computed(
            "rope",
            keys={"rope_theta": None, "rope_parameters": None, "rope_scaling": None},
            paths=("positional.*",),
            read=lambda config, recipe: {"positional": kind_ropes(config)["sliding_attention"]},
            write=lambda recipe, weights: {},  # with the layers, below
            requires={
                "positional.type": "rope",
                "positional.scaling": scaling_fits,
                "positional.interleaved": False,
                "positional.rotary_fraction": 1.0,
            },
            legacy=("rope_theta", "rope_parameters", "rope_scaling"),
        ),
        Computed(
            "layers",
            keys={"sliding_window": 4096, "layer_types": None},
            paths=("attention.window", "attention.rotary", "layers"),
            read=read_layers,
            write=write_layers,
            requires={"layers": only_attention_differs("window", "rotary"), "attention.rotary": one_rope_per_kind},
            last=True,
        ),
    ),
)
