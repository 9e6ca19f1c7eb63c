"""RoPE rows beyond ``rows.rope``, for ropes that configs write in their own ways: LongRoPE as the Phi line's configs
write it (Phi-3, PhiMoE), a dynamic rope with an NTK ``alpha`` (HunYuan), a fixed stretch of the base, YaRN
that always truncates (Gemma 3), the rope a config class fills in (gpt-oss) and pairs a config key chooses
(DeepSeek-V3)."""

from dataclasses import replace
from typing import Any

from zoo.errors import HFImportError

from .layer_kinds import layer_ropes
from .mapping import Requirement
from .rope import rope_options, rope_parameters, rope_theta, rope_type, scaling_parameters
from .rows import ROPE, rope
from .table import Computed, Row


def longrope(
    family: str,
    why: str,
    *,
    partial: bool = False,
    legacy: dict[str, str] | None = None,
    original: int | None = None,
    mscale: bool = False,
) -> tuple[Row, ...]:
    """The rope row of an unscaled rope or LongRoPE, and the refusals (``why``) of every other rope type.

    ``partial``: over the leading ``partial_rotary_factor`` of each head (``rows.rope``). ``legacy``: a family's
    old names of LongRoPE (``rope.PHI3_ROPE_TYPES``). ``original``: the default of a top-level
    ``original_max_position_embeddings`` past which LongRoPE switches to its long factors, written back (the
    model's length without LongRoPE). ``mscale``: cos and sin scaled by ``short_mscale`` (``long_mscale`` past the
    original length, which must be the same) and the short factors at every length (PhiMoE's): zoo's longrope with
    long factors = short ones and ``attention_factor`` = the mscale."""
    base = rope(partial=partial)

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        params = rope_parameters(config) if partial else scaling_parameters(config)
        if legacy:  # the rope parameters as the family's config class holds them, legacy names renamed
            params["rope_type"] = rope_type(params, legacy)
            config = {**config, "rope_scaling": None, "rope_parameters": params}
        if not mscale or rope_type(params) == "default":
            return base.read(config, recipe)
        short, long = params.get("short_mscale"), params.get("long_mscale")
        if short != long:
            raise HFImportError(
                f"short_mscale={short!r} and long_mscale={long!r}: {family}'s attention factor would change "
                "with the sequence length, which zoo's rope does not compute"
            )
        spec = base.read(config, recipe)["positional"]
        return {"positional": {**spec, "long_factor": spec["short_factor"], "attention_factor": float(short)}}

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        out, rotary = base.write(recipe, weights), recipe.positional
        if mscale and rotary.scaling == "longrope":
            factor = out["rope_parameters"].pop("attention_factor")
            out["rope_parameters"].update(short_mscale=factor, long_mscale=factor)
        if original is not None:  # transformers takes it over the rope parameters' own
            out["original_max_position_embeddings"] = (
                rotary.original_max_len if rotary.scaling == "longrope" else recipe.max_len
            )
        return out

    def fits(recipe: Any) -> str | None:
        rotary = recipe.positional
        if rotary.scaling == "none" or (
            rotary.scaling == "longrope"
            and rotary.long_factor == rotary.short_factor
            and rotary.attention_factor is not None
        ):
            return None
        return (
            f"{family}'s rope is unscaled, or LongRoPE with long factors equal to its short ones and an "
            "attention_factor"
        )

    row = replace(
        base,
        keys=base.keys if original is None else {**base.keys, "original_max_position_embeddings": original},
        read=read,
        write=write,
        requires={**base.requires, "positional.scaling": fits if mscale else ("none", "longrope")},
    )
    return row, *rope_options(("default", "longrope", *(legacy or {})), why)


def yarn_truncates(family: str) -> Requirement:
    """A requirement: every YaRN rope of the recipe, its layers' own included, truncates (transformers' ``family``
    always does, whatever its parameters say: Gemma 3's, as transformers 5 reads no nested ``truncate``)."""

    def check(recipe: Any) -> str | None:
        if any(rope.scaling == "yarn" and not rope.truncate for rope in layer_ropes(recipe)):
            return f"a yarn rope has truncate False; transformers' {family} always truncates YaRN's ramp"
        return None

    return check


def ntk_alpha_rope() -> Computed:
    """RoPE whose ``dynamic`` type with an ``alpha`` is a fixed NTK stretch of the base (HunYuan's), imported as
    that base, unscaled (and exported so); every other rope as ``rows.ROPE`` reads it."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        params = scaling_parameters(config)
        if rope_type(params) != "dynamic" or not params.get("alpha"):
            return ROPE.read(config, recipe)
        # transformers' NTK-alpha reads config.head_dim (not a derived one): base * alpha ** (d / (d - 2))
        dim = config["head_dim"]
        if dim is None:
            raise HFImportError("a dynamic rope with an alpha needs head_dim (transformers' NTK-alpha reads it)")
        theta = rope_theta({**config, "rope_parameters": params})
        return {"positional": {"type": "rope", "theta": theta * params["alpha"] ** (dim / (dim - 2))}}

    return replace(ROPE, read=read)


def rope_unless_given(params: dict[str, Any]) -> Computed:
    """``rows.ROPE``, where a config without ``rope_parameters`` or ``rope_scaling`` has the rope ``params`` at its
    ``rope_theta`` (what the config class fills in: gpt-oss's YaRN)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        if config["rope_parameters"] is None and config["rope_scaling"] is None:
            config = {**config, "rope_parameters": {**params, "rope_theta": config["rope_theta"]}}
        return ROPE.read(config, recipe)

    return replace(ROPE, read=read)


def rope_interleaved_by(key: str) -> Computed:
    """``rows.ROPE`` whose pairs are adjacent dims or halves as the config's ``key`` says (DeepSeek-V3's
    ``rope_interleave``), written back with ``rope_parameters`` alone (it holds the base)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        return {"positional": {**ROPE.read(config, recipe)["positional"], "interleaved": bool(config[key])}}

    return replace(
        ROPE,
        keys={**ROPE.keys, key: True},
        read=read,
        write=lambda recipe, weights: {
            "rope_parameters": ROPE.write(recipe, weights)["rope_parameters"],
            key: recipe.positional.interleaved,
        },
        requires={k: v for k, v in ROPE.requires.items() if k != "positional.interleaved"},
        legacy=("rope_scaling", "rope_theta"),
    )
