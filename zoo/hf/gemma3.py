"""Gemma 3, text only (``Gemma3ForCausalLM``, model_type ``gemma3_text``): Gemma 2's layout with QK-norm (a
(1 + w) RMSNorm over each head's features, before the rotation) in place of the score cap, five local layers to
one global (``sliding_window_pattern: 6``, or ``layer_types``), and a rope of its own for each kind: local layers
rotate with base 10,000 (``rope_local_base_freq``), global ones with 1,000,000 (``rope_theta``), optionally
scaled (``rope_scaling``, global layers only; any kind in ``rope_parameters``). transformers 5 reads YaRN's
``truncate`` from the top of the nested ``rope_parameters``, where it never is: Gemma 3's YaRN always truncates.

transformers 5 keeps both ropes in ``rope_parameters`` (``{sliding_attention: ..., full_attention: ...}``); both
that and transformers 4's keys import. The recipe's attention and positional are those of the more common kind
(the local layers); the other layers override the attention with their own ``rotary``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .gemma import GLOBAL, LOCAL, hf_layers, layer_ropes, layer_types, layer_types_option, local_global, plan_problems
from .gemma2 import GEMMA2, LAYERS
from .mapping import Option
from .rope import ROPE_SCALINGS, ROPE_TYPE_WHY, hf_rope_parameters, rope_spec
from .rows import ROPE
from .table import Computed, Unread


def ropes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The zoo rope of each kind of layer, as transformers' ``Gemma3TextConfig`` assembles them: its
    ``rope_parameters``, else ``rope_theta`` (global), ``rope_local_base_freq`` (local) and ``rope_scaling``
    (global layers only)."""
    given = config["rope_parameters"] or {}
    out = {}
    for kind, base in ((GLOBAL, config["rope_theta"]), (LOCAL, config["rope_local_base_freq"])):
        params = dict(given.get(kind) or {"rope_type": "default"})
        if kind == GLOBAL and config["rope_scaling"]:
            params.update(config["rope_scaling"])
        params.setdefault("rope_theta", base)
        # Nested parameters: transformers reads no top-level original_max_position_embeddings, and truncates.
        spec = rope_spec({**config, "original_max_position_embeddings": None}, params)
        spec.pop("truncate", None)
        out[kind] = spec
    return out


def hf_ropes(recipe: Any, weights: Any) -> dict[str, Any]:
    """``layer_types``, ``sliding_window`` and the rope of each kind (a kind no layer has: the stack's rope)."""
    out = hf_layers(recipe)
    kinds = dict.fromkeys((LOCAL, GLOBAL), recipe.positional)
    for kind, rope in zip(out["layer_types"], layer_ropes(recipe), strict=True):
        kinds[kind] = rope
    return {**out, "rope_parameters": {kind: hf_rope_parameters(rope) for kind, rope in kinds.items()}}


def truncated(recipe: Any) -> str | None:
    """A requirement: every YaRN rope truncates (transformers' Gemma 3 does, whatever its parameters say)."""
    if any(rope.scaling == "yarn" and not rope.truncate for rope in layer_ropes(recipe)):
        return "a yarn rope has truncate False; transformers' Gemma 3 always truncates YaRN's ramp"
    return None


def qk_norm(recipe: Any) -> str | None:
    """A requirement: queries and keys normalised per head by Gemma's (1 + w) RMSNorm at the model's eps."""
    attention = recipe.attention
    norm = attention.qk_norm
    fits = (
        norm is not None
        and norm.type == "rmsnorm"
        and norm.affine
        and norm.offset == 1.0
        and norm.eps == recipe.norm.eps
        and attention.qk_norm_scope == "head"
    )
    if not fits:
        return (
            f"attention.qk_norm is {None if norm is None else norm.model_dump()} (scope {attention.qk_norm_scope}), "
            f"needs {{type: rmsnorm, eps: {recipe.norm.eps}, offset: 1.0}} per head (Gemma 3's q_norm and k_norm)"
        )
    return None


QK_NORM = Computed(
    "qk norm",
    keys={},
    paths=("attention.qk_norm", "attention.qk_norm_scope"),
    read=lambda config, recipe: {
        "attention.qk_norm": {"type": "rmsnorm", "eps": config["rms_norm_eps"], "offset": 1.0}
    },
    write=lambda recipe, weights: {"attn_logit_softcapping": None},  # the score cap QK-norm replaced: none
    requires={"attention.qk_norm": qk_norm},
)

ROPES = replace(  # a rope of each layer kind: the layers row writes the recipe's positional and the others' rotary
    LAYERS,
    keys={**LAYERS.keys, **ROPE.keys, "rope_local_base_freq": 10_000.0, "sliding_window_pattern": 6},
    paths=("positional.*", *LAYERS.paths),
    read=lambda config, recipe: local_global(
        layer_types(config, pattern=config["sliding_window_pattern"]),
        recipe["attention"],
        config["sliding_window"],
        ropes(config),
    ),
    write=hf_ropes,
    requires={
        **ROPE.requires,
        "positional.truncate": truncated,
        "layers": lambda recipe: plan_problems(recipe, one_rope=False),
    },
    legacy=("rope_theta", "rope_local_base_freq", "rope_scaling", "sliding_window_pattern"),  # transformers 4's
)


def _rope_options(kind: str) -> tuple[Option, ...]:
    return (
        Option(f"rope_parameters.{kind}.rope_type", lambda v: v is None or v in ROPE_SCALINGS, ROPE_TYPE_WHY),
        Option(
            f"rope_parameters.{kind}.partial_rotary_factor",
            lambda v: v in (None, 1.0),
            "Gemma 3's attention rotates every head dim",
        ),
    )


GEMMA3 = GEMMA2.derive(
    "gemma3",
    model_type="gemma3_text",
    classes=("Gemma3ForCausalLM",),
    recipes=("gemma-3-1b",),
    drop=("rope", "rope_parameters.rope_type", "rope_parameters.partial_rotary_factor", "attn_logit_softcapping"),
    rows=(
        QK_NORM,
        ROPES,
        *_rope_options(LOCAL),
        *_rope_options(GLOBAL),
        layer_types_option("Gemma 3"),
        Unread(
            "attn_logit_softcapping",
            "transformers' Gemma 3 attention never applies it (QK-norm took the score cap's place), so zoo leaves "
            "the scores uncapped as transformers does",
        ),
        Unread(
            "_sliding_window_pattern",
            "transformers' copy of sliding_window_pattern; the layer_types written beside it say which layers are "
            "local, as transformers reads them",
        ),
    ),
    defaults={
        "vocab_size": 262208,
        "max_position_embeddings": 131072,
        "rope_theta": 1_000_000.0,
        "final_logit_softcapping": None,
    },
)
