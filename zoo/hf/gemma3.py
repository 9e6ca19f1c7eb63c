"""Gemma 3, text only (``Gemma3ForCausalLM``, model_type ``gemma3_text``): Gemma 2's layout with QK-norm (a
(1 + w) RMSNorm over each head, before the rotation) in place of the score cap, five local layers to one global
(``sliding_window_pattern: 6``, or ``layer_types``), and a rope for each kind: local layers rotate with base 10,000
(``rope_local_base_freq``), global ones with ``rope_theta``, scaled by ``rope_scaling`` (transformers 4's keys), or
each kind's ``rope_parameters`` (transformers 5's). Its YaRN always truncates (transformers 5 reads ``truncate``
from the top of the nested ``rope_parameters``, where it never is). The recipe's attention and positional are
those of the more common kind (the local layers); the other layers override the attention with their ``rotary``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import layer_kinds as kinds
from .gemma2 import GEMMA2, LAYERS
from .rope import rope_spec
from .rows import ROPE
from .table import Computed, Unread


def ropes(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The zoo rope of each kind of layer, as transformers' ``Gemma3TextConfig`` assembles them: its
    ``rope_parameters``, else ``rope_theta`` (global), ``rope_local_base_freq`` (local) and ``rope_scaling``
    (global layers only)."""
    given = config["rope_parameters"] or {}
    out = {}
    for kind, base in ((kinds.GLOBAL, config["rope_theta"]), (kinds.LOCAL, config["rope_local_base_freq"])):
        params = dict(given.get(kind) or {"rope_type": "default"})
        if kind == kinds.GLOBAL and config["rope_scaling"]:
            params.update(config["rope_scaling"])
        params.setdefault("rope_theta", base)
        # Nested parameters: transformers reads no top-level original_max_position_embeddings, and truncates.
        spec = rope_spec({**config, "original_max_position_embeddings": None}, params)
        spec.pop("truncate", None)
        out[kind] = spec
    return out


def truncated(recipe: Any) -> str | None:
    """A requirement: every YaRN rope truncates (transformers' Gemma 3 does, whatever its parameters say)."""
    if any(rope.scaling == "yarn" and not rope.truncate for rope in kinds.layer_ropes(recipe)):
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
    read=lambda config, recipe: kinds.local_global(
        kinds.gemma_layer_types(config, pattern=config["sliding_window_pattern"]),
        recipe["attention"],
        config["sliding_window"],
        ropes(config),
    ),
    write=lambda recipe, weights: {**kinds.hf_gemma_layers(recipe), "rope_parameters": kinds.hf_kind_ropes(recipe)},
    requires={
        **ROPE.requires,
        "positional.truncate": truncated,
        "layers": lambda recipe: kinds.gemma_layers_fit(recipe, one_rope=False),
    },
    legacy=("rope_theta", "rope_local_base_freq", "rope_scaling", "sliding_window_pattern"),  # transformers 4's
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
        *kinds.rope_options_per_kind("Gemma 3's attention rotates every head dim", rope_type=True),
        kinds.layer_types_option("Gemma 3"),
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
