"""FalconMamba (``FalconMambaForCausalLM``, TII's Falcon Mamba 7B): Mamba's network with a weightless RMSNorm on
the step sizes, B and C after ``x_proj`` (epsilon ``mixer_rms_eps``): zoo's ``mamba`` mixer with ``inner_norms``
and ``inner_norm_weights: false``. Everything else is Mamba's (``zoo_mamba/hf.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .hf import MAMBA, mamba_config, mamba_recipe


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    out = mamba_recipe(config, hf_class, names)
    mixer = {**out["attention"], "inner_norms": True, "inner_norm_weights": False, "norm_eps": config["mixer_rms_eps"]}
    return {**out, "attention": mixer, "hf_family": "falcon_mamba"}


def config(recipe: Any, weights: Any) -> dict[str, Any]:
    return {**mamba_config(recipe, weights), "mixer_rms_eps": recipe.attention.norm_eps}


def weightless_inner_norms(recipe: Any) -> str | None:
    """A requirement: the weightless inner norms of FalconMamba's mixer."""
    mixer = recipe.attention
    if not getattr(mixer, "inner_norms", False) or mixer.inner_norm_weights:
        return "attention needs inner_norms: true and inner_norm_weights: false (FalconMamba's weightless norms)"
    return None


FALCON_MAMBA = replace(
    MAMBA,
    name="falcon_mamba",
    model_type="falcon_mamba",
    classes=("FalconMambaForCausalLM",),
    defaults={**MAMBA.defaults, "vocab_size": 50280, "hidden_size": 768, "mixer_rms_eps": 1e-6},
    requirements={
        **MAMBA.requirements,
        "attention.inner_norms": weightless_inner_norms,
        "hf_family": ("falcon_mamba", None),
    },
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "FalconMambaForCausalLM",
    recipes=("falcon-mamba-7b",),
)
