"""Qwen3 (``Qwen3ForCausalLM``): Qwen2's network with QK-norm, an RMSNorm over each head's ``head_dim``
features of the queries and of the keys (before RoPE), one ``attention_bias`` for all four projections (off
in the published models) and ``head_dim`` 128 by default. Sliding-window layers as in Qwen2.
"""

from __future__ import annotations

from typing import Any

from .llama import LLAMA_RULES
from .mapping import Rule
from .qwen2 import QWEN2
from .rows import ONE_BIAS
from .table import Computed

QWEN3_RULES = (
    *LLAMA_RULES,
    Rule("model.layers.{i}.self_attn.q_norm.weight", "blocks.{i}.attention.q_norm.weight"),
    Rule("model.layers.{i}.self_attn.k_norm.weight", "blocks.{i}.attention.k_norm.weight"),
)


def qk_norm_is_the_norm(recipe: Any) -> str | None:
    """A requirement: per-head QK-norm by the recipe's own RMSNorm (Qwen3 builds both with ``rms_norm_eps``)."""
    attention = recipe.attention
    qk_norm = attention.qk_norm
    spec = None if qk_norm is None else qk_norm.model_dump()
    if qk_norm != recipe.norm or attention.qk_norm_scope != "head":
        return (
            f"attention.qk_norm is {spec!r} over {attention.qk_norm_scope!r}, needs the recipe's norm "
            f"({recipe.norm.model_dump()}) over each head (Qwen3's q_norm and k_norm)"
        )
    return None


QK_NORM = Computed(
    "qk norm",
    keys={},
    paths=("attention.qk_norm", "attention.qk_norm_scope"),
    read=lambda config, recipe: {"attention.qk_norm": {"type": "rmsnorm", "eps": config["rms_norm_eps"]}},
    write=lambda recipe, weights: {},
    requires={"attention.qk_norm": qk_norm_is_the_norm},
)

QWEN3 = QWEN2.derive(
    "qwen3",
    classes=("Qwen3ForCausalLM",),
    rules=QWEN3_RULES,
    recipes=("qwen3-0.6b",),
    rows=(ONE_BIAS, QK_NORM),
    defaults={"head_dim": 128},
)
