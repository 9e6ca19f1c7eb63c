"""RoPE as Hugging Face configs write it, both ways: the base (``rope_theta``), the frequency scaling of
``rope_parameters`` (transformers 5) or ``rope_scaling`` (4.x), and the share of each head rotated
(``partial_rotary_factor``). Every RoPE family reads and writes its rope through these functions.
"""

from __future__ import annotations

import math
from typing import Any

from zoo.errors import HFImportError

from .mapping import Option, lookup

ROPE_SCALINGS = {"default": "none", "linear": "linear", "llama3": "llama3"}
"""Hugging Face ``rope_type`` -> zoo's rope ``scaling``."""


def rope_spec(config: dict[str, Any]) -> dict[str, Any]:
    """zoo's rope spec: the base, and the frequency scaling of ``rope_parameters`` (5.x) / ``rope_scaling`` (4.x)."""
    spec: dict[str, Any] = {"type": "rope", "theta": rope_theta(config)}
    params = lookup(config, "rope_parameters", None) or config.get("rope_scaling") or {}
    scaling = ROPE_SCALINGS[params.get("rope_type") or params.get("type") or "default"]
    if scaling != "none":
        spec.update(scaling=scaling, scaling_factor=float(params["factor"]))
    if scaling == "llama3":
        spec.update(
            low_freq_factor=float(params.get("low_freq_factor", 1.0)),  # Meta's values where a config omits them
            high_freq_factor=float(params.get("high_freq_factor", 4.0)),
            original_max_len=int(params.get("original_max_position_embeddings", 8192)),
        )
    return spec


def hf_rope_parameters(rope: Any) -> dict[str, Any]:
    """The ``rope_parameters`` of a zoo rope config (the way back of ``rope_spec``)."""
    params: dict[str, Any] = {
        "rope_type": "default" if rope.scaling == "none" else rope.scaling,
        "rope_theta": rope.theta,
    }
    if rope.scaling != "none":
        params["factor"] = rope.scaling_factor
    if rope.scaling == "llama3":
        params.update(
            low_freq_factor=rope.low_freq_factor,
            high_freq_factor=rope.high_freq_factor,
            original_max_position_embeddings=rope.original_max_len,
        )
    return params


def rope_theta(config: dict[str, Any]) -> float:
    """RoPE's base: in ``rope_parameters`` (transformers 5) or at the top level (transformers 4)."""
    return float(lookup(config, "rope_parameters.rope_theta", None) or config["rope_theta"])


def rope_parameters(
    config: dict[str, Any], *, theta: str = "rope_theta", fraction: str = "partial_rotary_factor"
) -> dict[str, Any]:
    """The config's ``rope_parameters`` as transformers 5 holds them: its own (5.x), else built from the
    4.x top-level keys (``theta`` and ``fraction`` name them: GPT-NeoX's ``rotary_emb_base``, ``rotary_pct``)
    and ``rope_scaling``. ``config`` has the family's defaults merged in, so both keys are always there."""
    params = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    params.setdefault("rope_theta", config[theta])
    params.setdefault("partial_rotary_factor", config[fraction])
    params.setdefault("rope_type", params.get("type") or "default")
    return params


ROPE_TYPE_WHY = "zoo's rope scales frequencies linearly or by the llama3 rule only (no dynamic, yarn, longrope)"

ROPE_OPTIONS = (
    Option(
        "rope_scaling", lambda v: v is None or (v.get("rope_type") or v.get("type")) in ROPE_SCALINGS, ROPE_TYPE_WHY
    ),
    Option("rope_parameters.rope_type", lambda v: v is None or v in ROPE_SCALINGS, ROPE_TYPE_WHY),
)
"""RoPE frequency scalings zoo computes exactly (the same ones as Llama's)."""


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
    spec = rope_spec({"rope_parameters": params, "rope_theta": params["rope_theta"]})
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
