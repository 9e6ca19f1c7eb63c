"""RoPE as Hugging Face configs write it, both ways: the base (``rope_theta``), the frequency scaling of
``rope_parameters`` (transformers 5) or ``rope_scaling`` (4.x), and the share of each head rotated
(``partial_rotary_factor``). Every RoPE family reads and writes its rope through these functions.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from zoo.errors import HFImportError

from .mapping import Option, lookup

ROPE_SCALINGS = {
    "default": "none",
    "linear": "linear",
    "dynamic": "dynamic",
    "yarn": "yarn",
    "longrope": "longrope",
    "llama3": "llama3",
}
"""Hugging Face ``rope_type`` -> zoo's rope ``scaling``: every rope type transformers computes that zoo does too."""

HF_ROPE_TYPES = {scaling: kind for kind, scaling in ROPE_SCALINGS.items()}
"""zoo's rope ``scaling`` -> the Hugging Face ``rope_type`` written on export."""

PHI3_ROPE_TYPES = {"su": "longrope", "yarn": "longrope"}
"""Phi-3's legacy names of LongRoPE, which ``Phi3Config`` renames (its ``yarn`` is LongRoPE, not YaRN)."""

SCALING_FIELDS = (
    "scaling",
    "scaling_factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_len",
    "beta_fast",
    "beta_slow",
    "truncate",
    "attention_factor",
    "mscale",
    "mscale_all_dim",
    "short_factor",
    "long_factor",
)
"""The fields of zoo's rope config that ``hf_rope_parameters`` writes for one scaling or another (for families
whose requirements hold every other positional field at its default)."""


def scaling_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """A config's rope parameters as transformers 5 takes them: 4.x ``rope_scaling`` (which transformers 5 takes
    over ``rope_parameters``), else ``rope_parameters``, else {} (unscaled, the base at the top level)."""
    return dict(config.get("rope_scaling") or lookup(config, "rope_parameters", None) or {})


def rope_type(params: dict[str, Any], renamed: dict[str, str] | None = None) -> str:
    """The ``rope_type`` of rope parameters: ``rope_type``, 4.x's ``type``, else ``default``; ``renamed`` maps a
    family's legacy names (``PHI3_ROPE_TYPES``)."""
    kind = params.get("rope_type") or params.get("type") or "default"
    return (renamed or {}).get(kind, kind)


def original_length(config: dict[str, Any], params: dict[str, Any]) -> int:
    """The context length llama3, yarn and longrope scale from, as transformers' ``standardize_rope_params``
    settles it: the config's own top-level ``original_max_position_embeddings`` where it has one (Phi-3's
    exception, which transformers prefers), else the rope parameters', else ``max_position_embeddings``."""
    for value in (config.get("original_max_position_embeddings"), params.get("original_max_position_embeddings")):
        if value is not None:
            return int(value)
    return int(config["max_position_embeddings"])


def _factor(params: dict[str, Any], kind: str) -> float:
    if params.get("factor") is None:
        raise HFImportError(f"rope_type {kind!r} needs its 'factor' in rope_parameters (rope_scaling in 4.x)")
    return float(params["factor"])


def rope_spec(config: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
    """zoo's rope spec: the base, and the frequency scaling of ``rope_parameters`` (5.x) / ``rope_scaling`` (4.x),
    each parameter read as transformers' ``ROPE_INIT_FUNCTIONS`` read it.

    ``config`` has the family's defaults merged in (``max_position_embeddings`` and the 4.x ``rope_theta``);
    ``params`` are the rope parameters where the family keeps them elsewhere (Gemma 3's per layer kind, the
    GPT-NeoX line's 4.x keys), by default ``scaling_parameters(config)``.

    Raises:
        HFImportError: a rope type zoo does not compute (the families' options refuse them first), or a
            scaling without its ``factor`` (longrope: its factors).
    """
    params = scaling_parameters(config) if params is None else params
    given = params.get("rope_theta")
    spec: dict[str, Any] = {"type": "rope", "theta": rope_theta(config) if given is None else _base(given)}
    kind = rope_type(params)
    if kind not in ROPE_SCALINGS:
        raise HFImportError(f"rope_type {kind!r} is not supported: {ROPE_TYPE_WHY}")
    scaling = ROPE_SCALINGS[kind]
    if scaling == "none":
        return spec
    positions = int(config["max_position_embeddings"])
    if scaling in ("linear", "dynamic"):
        spec.update(scaling=scaling, scaling_factor=_factor(params, kind))
        if scaling == "dynamic":  # transformers grows the base past max_position_embeddings
            spec["original_max_len"] = positions
        return spec
    original = original_length(config, params)
    if scaling == "llama3":
        return {
            **spec,
            "scaling": "llama3",
            "scaling_factor": _factor(params, kind),
            "low_freq_factor": float(params.get("low_freq_factor", 1.0)),  # Meta's values where a config omits them
            "high_freq_factor": float(params.get("high_freq_factor", 4.0)),
            "original_max_len": original,
        }
    # yarn and longrope: without a factor, transformers takes the ratio of the two lengths.
    factor = float(params.get("factor") or positions / original)
    if scaling == "yarn":
        spec.update(
            scaling="yarn",
            scaling_factor=factor,
            original_max_len=original,
            beta_fast=float(params.get("beta_fast") or 32),  # transformers' `or`: 0 is the default too
            beta_slow=float(params.get("beta_slow") or 1),
            truncate=bool(params.get("truncate", True)),
        )
        keys: tuple[str, ...] = ("attention_factor", "mscale", "mscale_all_dim")
    else:
        if params.get("short_factor") is None or params.get("long_factor") is None:
            raise HFImportError("rope_type 'longrope' needs its short_factor and long_factor in rope_parameters")
        spec.update(
            scaling="longrope",
            scaling_factor=max(factor, 1.0),  # only sets the attention factor, which is 1 for factors up to 1
            original_max_len=original,
            short_factor=[float(f) for f in params["short_factor"]],
            long_factor=[float(f) for f in params["long_factor"]],
        )
        keys = ("attention_factor",)
    spec.update((key, float(params[key])) for key in keys if params.get(key) is not None)
    return spec


def hf_rope_parameters(rope: Any) -> dict[str, Any]:
    """The ``rope_parameters`` of a zoo rope config (the way back of ``rope_spec``): every parameter its
    scaling reads, so that transformers derives nothing from the config's other keys."""
    params: dict[str, Any] = {"rope_type": HF_ROPE_TYPES[rope.scaling], "rope_theta": rope.theta}
    if rope.scaling == "none":
        return params
    params["factor"] = rope.scaling_factor
    if rope.scaling == "llama3":
        params.update(low_freq_factor=rope.low_freq_factor, high_freq_factor=rope.high_freq_factor)
    if rope.scaling == "yarn":
        params.update(beta_fast=rope.beta_fast, beta_slow=rope.beta_slow, truncate=rope.truncate)
    if rope.scaling == "longrope":
        params.update(short_factor=list(rope.short_factor), long_factor=list(rope.long_factor))
    if rope.scaling in ("llama3", "yarn", "longrope"):
        params["original_max_position_embeddings"] = rope.original_max_len
    for key in ("attention_factor", "mscale", "mscale_all_dim"):
        if getattr(rope, key) is not None:
            params[key] = getattr(rope, key)
    return params


def recipe_ropes(recipe: Any) -> list[Any]:
    """Every rope config of a recipe: its positional, and the ``rotary`` of layers that have their own."""
    ropes = [recipe.positional]
    if recipe.layers:
        ropes += [getattr(placed["attention"][0], "rotary", None) for placed in recipe.layer_plan("decoder")]
    return [rope for rope in ropes if getattr(rope, "type", None) == "rope"]


def scaling_fits(recipe: Any) -> str | None:
    """A requirement: transformers can say each rope's scaling. Dynamic NTK grows the base past the model's
    ``max_position_embeddings`` in transformers, so a dynamic rope's ``original_max_len`` is the recipe's
    ``max_len``."""
    for rope in recipe_ropes(recipe):
        if rope.scaling == "dynamic" and rope.original_max_len != recipe.max_len:
            return (
                f"a dynamic rope's original_max_len is {rope.original_max_len}, needs max_len ({recipe.max_len}): "
                "transformers grows the base past max_position_embeddings"
            )
    return None


def rope_theta(config: dict[str, Any]) -> float:
    """RoPE's base: in ``rope_parameters`` (transformers 5) or at the top level (transformers 4)."""
    given = lookup(config, "rope_parameters.rope_theta", None)
    return _base(config["rope_theta"] if given is None else given)


def _base(value: Any) -> float:
    """A RoPE base as given: a finite number above 0 (never replaced by a default when it is given)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise HFImportError(f"rope_theta={value!r} must be a finite number above 0 (the RoPE base)")
    return float(value)


def rope_parameters(
    config: dict[str, Any], *, theta: str = "rope_theta", fraction: str = "partial_rotary_factor"
) -> dict[str, Any]:
    """The config's ``rope_parameters`` as transformers 5 holds them: its own (5.x), else built from the
    4.x top-level keys (``theta`` and ``fraction`` name them: GPT-NeoX's ``rotary_emb_base``, ``rotary_pct``)
    and ``rope_scaling``. ``config`` has the family's defaults merged in, so both keys are always there."""
    params = scaling_parameters(config)
    params.setdefault("rope_theta", config[theta])
    params.setdefault("partial_rotary_factor", config[fraction])
    params.setdefault("rope_type", params.get("type") or "default")
    return params


ROPE_TYPE_WHY = (
    "zoo's rope computes the rope types default, linear, dynamic, yarn, longrope and llama3 of transformers' "
    "ROPE_INIT_FUNCTIONS only"
)


def rope_options(types: Collection[str], why: str) -> tuple[Option, ...]:
    """The refusals of every rope type but ``types`` (``why``), in 4.x ``rope_scaling`` and in ``rope_parameters``."""
    return (
        Option("rope_scaling", lambda v: v is None or rope_type(v) in types, why),
        Option("rope_parameters.rope_type", lambda v: v is None or v in types, why),
    )


ROPE_OPTIONS = rope_options(ROPE_SCALINGS, ROPE_TYPE_WHY)
"""RoPE frequency scalings zoo computes exactly (every family's that reads its rope through this module)."""


def hf_rotary_dims(head_dim: int, fraction: float) -> int:
    """How many leading dims of a head transformers rotates: ``int(head_dim * partial_rotary_factor)``, a
    truncation (zoo's ``rotary_dims`` rounds)."""
    return int(head_dim * fraction)


def exact_fraction(rotated: int, head_dim: int) -> float:
    """The smallest ``rotary_fraction`` from ``rotated / head_dim`` up for which zoo (round) and transformers
    (int) both rotate ``rotated`` dims: ``44 * (30 / 44)`` is 29.999..., which transformers truncates to 29."""
    fraction = rotated / head_dim
    while hf_rotary_dims(head_dim, fraction) < rotated:
        fraction = math.nextafter(fraction, 2.0)
    return fraction


def rotary_fraction(rotated: int, head_dim: int, fraction: float | None = None) -> float:
    """zoo's ``rotary_fraction`` for a head of ``head_dim`` dims whose first ``rotated`` transformers rotates:
    the config's own ``fraction`` where zoo rounds it to the same count, else ``exact_fraction``.

    Raises:
        HFImportError: an odd or zero count (transformers' cos/sin tables then do not fit the rotated dims).
    """
    if rotated < 2 or rotated % 2 or rotated > head_dim:
        raise HFImportError(
            f"rope rotates {rotated} of {head_dim} head dims; zoo (and transformers' own cos/sin tables) need an "
            f"even number from 2 to {head_dim}"
        )
    if fraction is not None and round(head_dim * fraction) == rotated:
        return fraction
    return exact_fraction(rotated, head_dim)


def partial_rope(config: dict[str, Any], head_dim: int, **keys: str) -> dict[str, Any]:
    """zoo's rope spec (base, scaling, rotated fraction) of a config that rotates ``partial_rotary_factor``
    of each head; ``keys`` name its 4.x top-level keys (see ``rope_parameters``)."""
    params = rope_parameters(config, **keys)
    fraction = float(params["partial_rotary_factor"])
    spec = rope_spec(config, params)
    spec["rotary_fraction"] = rotary_fraction(hf_rotary_dims(head_dim, fraction), head_dim, fraction)
    return spec


def hf_partial_rope(rope: Any) -> dict[str, Any]:
    """The ``rope_parameters`` of a zoo rope config, its rotated fraction included."""
    return {**hf_rope_parameters(rope), "partial_rotary_factor": rope.rotary_fraction}


def same_rotary_dims(recipe: Any) -> str | None:
    """A requirement: transformers (int) and zoo (round) rotate the same number of dims of each head."""
    head_dim = recipe.attention.head_dim_for(recipe.d_model)
    fraction = recipe.positional.rotary_fraction
    zoo, hf = round(head_dim * fraction), hf_rotary_dims(head_dim, fraction)
    if zoo != hf:
        return (
            f"positional.rotary_fraction {fraction} rotates {zoo} of {head_dim} head dims in zoo but {hf} in "
            f"transformers (int(head_dim * fraction)); set it to {exact_fraction(zoo, head_dim)!r}"
        )
    return None
