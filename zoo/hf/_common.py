"""What the GPT-NeoX line of families shares (gpt_neox, gptj, falcon, phi, stablelm, phi3): RoPE over a leading
part of each head read from either transformers' config layout, fused qkv / gate_up projections whose split
depends on the head counts, and a requirement that a component sets no option its family's config cannot say.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from zoo.errors import HFImportError

from .llama import ROPE_SCALINGS, hf_rope_parameters, rope_spec
from .mapping import Option, Requirement, Transform

# ---------------------------------------------------------------------------------------------- rotary


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


# ---------------------------------------------------------------------------------------------- fused weights


def _heads(recipe: Any) -> tuple[int, int, int]:
    attention = recipe.attention
    return attention.num_heads, attention.num_kv_heads, attention.head_dim_for(recipe.d_model)


def stacked_qkv(recipe: Any) -> Transform:
    """A fused qkv (weight or bias) that holds all queries, then all keys, then all values (Phi-3):
    ``[q (H*D) | k (Hkv*D) | v (Hkv*D)]`` along its first dim."""
    heads, kv_heads, head_dim = _heads(recipe)
    sizes = [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim]
    return Transform(
        f"split q|k|v as {sizes[0]}|{sizes[1]}|{sizes[2]}",
        lambda t: list(t[0].split(sizes, dim=0)),
        lambda t: [torch.cat(list(t), dim=0)],
    )


def grouped_qkv(recipe: Any) -> Transform:
    """A fused qkv (weight or bias) laid out per key/value head: for each of the Hkv groups, its H/Hkv query
    heads, its key head, its value head (``[Hkv, H/Hkv + 2, D]``). With Hkv = H this is GPT-NeoX's per-head
    ``[H, 3, D]``; with Hkv = 1 Falcon-7B's ``[q (H*D) | k (D) | v (D)]``; in between Falcon-40B's groups."""
    heads, kv_heads, head_dim = _heads(recipe)
    group = heads // kv_heads

    def to_zoo(t: list[torch.Tensor]) -> list[torch.Tensor]:
        fused = t[0].unflatten(0, (kv_heads, group + 2, head_dim))  # (Hkv, G + 2, D, ...)
        q, k, v = fused.split([group, 1, 1], dim=1)
        return [q.flatten(0, 2), k.flatten(0, 2), v.flatten(0, 2)]

    def to_hf(t: list[torch.Tensor]) -> list[torch.Tensor]:
        q, k, v = (x.unflatten(0, (kv_heads, -1, head_dim)) for x in t)  # (Hkv, G or 1, D, ...)
        return [torch.cat([q, k, v], dim=1).flatten(0, 2)]

    return Transform(f"split q|k|v per {kv_heads} key/value head(s) of {group} queries", to_zoo, to_hf)


SPLIT_GATE_UP = Transform("split gate|up", lambda t: list(t[0].chunk(2, dim=0)), lambda t: [torch.cat(list(t), dim=0)])
"""A fused ``gate_up_proj`` weight (2H, E): the gate's rows, then the up projection's (Phi-3)."""


# ---------------------------------------------------------------------------------------------- requirements


def defaults_except(section: str, *kept: str) -> Requirement:
    """A requirement (keyed ``"<section>.*"``, after the section's ``type``): every field of the recipe's
    ``section`` other than ``type`` and ``kept`` holds its default. What a family's config has no key for
    cannot be exported, including options a component gains later."""

    def check(recipe: Any) -> str | None:
        config = getattr(recipe, section)
        off = []
        for name, info in type(config).model_fields.items():
            if name in ("type", *kept) or info.is_required():
                continue
            default = info.get_default(call_default_factory=True)
            if getattr(config, name) != default:
                off.append(f"{section}.{name} is {getattr(config, name)!r}, needs {default!r}")
        return "; ".join(off) or None

    return check


BIAS_FIELDS = ("bias", "q_bias", "k_bias", "v_bias", "o_bias")
"""The attention fields that say which projections have biases (checked by ``attention_biases``)."""


def attention_biases(*, qkv: bool | None = None, o: bool | None = None, o_like_qkv: bool = False) -> Requirement:
    """A requirement: q, k and v all biased or all not (as ``qkv`` says, None: either), and the output
    projection as ``o`` says (None: either) or, with ``o_like_qkv``, like them (one ``bias`` flag)."""

    def check(recipe: Any) -> str | None:
        on = recipe.attention.biases()
        shown = "/".join(str(on[p]) for p in "qkvo")
        if not on["q"] == on["k"] == on["v"] or (o_like_qkv and on["o"] != on["q"]):
            alike = "q/k/v/o" if o_like_qkv else "q/k/v"
            return f"attention biases q/k/v/o are {shown}, needs {alike} alike"
        if qkv is not None and on["q"] != qkv:
            return f"attention biases q/k/v/o are {shown}, needs q/k/v {qkv}"
        if o is not None and on["o"] != o:
            return f"attention biases q/k/v/o are {shown}, needs o {o}"
        return None

    return check
