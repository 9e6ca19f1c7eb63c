"""Rows that the Gemma families share: the gated FFN, the sandwich norms' weight table, a row read and written under
other key names or with some values read as others, the score scale ``query_pre_attn_scalar ** -0.5``, the soft
caps' reader, and local and global layers with a rope of each kind."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .layer_kinds import GLOBAL, LOCAL, kind_ropes, local_global_layers, rope_options_per_kind
from .llama import ATTENTION, BLOCK, COMMON, LAYER, LLAMA_RULES
from .mapping import Rule
from .rows import ROPE, gated_ffn
from .rows_rope import yarn_truncates
from .table import Computed, Row

GATED_FFN = gated_ffn()

SANDWICH_RULES = (
    *COMMON[:2],  # the embeddings, the attention's input norm
    *ATTENTION,
    *(Rule(f"{LAYER}.self_attn.{p}_norm.weight", f"{BLOCK}.attention.{p}_norm.weight") for p in "qk"),  # Gemma 3
    Rule(f"{LAYER}.post_attention_layernorm.weight", f"{BLOCK}.attention_post_norm.weight"),
    Rule(f"{LAYER}.pre_feedforward_layernorm.weight", f"{BLOCK}.ffn_norm.weight"),
    *(r for r in LLAMA_RULES if ".mlp." in r.hf_names[0]),
    Rule(f"{LAYER}.post_feedforward_layernorm.weight", f"{BLOCK}.ffn_post_norm.weight"),
    *COMMON[-2:],  # the final norm and the head (only when untied)
)
"""Gemma 2 and 3: a norm before and after each sub-layer (``post_attention_layernorm`` is the one *after*
attention here, where in Gemma and Llama it is the FFN's input norm)."""


def renamed(row: Computed, **names: str) -> Computed:
    """``row`` reading and writing config keys under other names (``hidden_activation="hidden_act"``: Gemma 2's
    key for what Gemma's row calls ``hidden_act``)."""
    theirs = {old: new for new, old in names.items()}

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        return row.read({**config, **{old: config[new] for new, old in names.items()}}, recipe)

    def write(recipe: Any, weights: Any) -> dict[str, Any]:
        return {theirs.get(k, k): v for k, v in row.write(recipe, weights).items()}

    return replace(row, keys={theirs.get(k, k): v for k, v in row.keys.items()}, read=read, write=write)


def aliased(row: Computed, key: str, **values: str) -> Computed:
    """``row`` reading some values of the config's ``key`` as others (``gelu="gelu_pytorch_tanh"``: Gemma 1's
    ``hidden_act``, whose ``gelu`` transformers' GemmaConfig reads as the tanh GELU)."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        return row.read({**config, key: values.get(config[key], config[key])}, recipe)

    return replace(row, read=read)


def attention_scale(config: dict[str, Any]) -> float | None:
    """The score scale ``query_pre_attn_scalar ** -0.5``; None where that is zoo's default 1/sqrt(head_dim)."""
    scalar = config["query_pre_attn_scalar"]
    head_dim = config["head_dim"] or config["hidden_size"] // config["num_attention_heads"]
    return None if scalar == head_dim else float(scalar) ** -0.5


def query_pre_attn_scalar(recipe: Any) -> int:
    """The integer ``query_pre_attn_scalar`` of a recipe's score scale (the way back of ``attention_scale``)."""
    scale = recipe.attention.scale
    return recipe.attention.head_dim_for(recipe.d_model) if scale is None else round(scale**-2)


def integer_scalar(recipe: Any) -> str | None:
    """A requirement: the score scale is ``q ** -0.5`` for an integer ``q`` (the config holds the integer)."""
    scale = recipe.attention.scale
    if scale is not None and float(query_pre_attn_scalar(recipe)) ** -0.5 != scale:
        return f"attention.scale is {scale}, needs query_pre_attn_scalar ** -0.5 for an integer query_pre_attn_scalar"
    return None


SCALE = Computed(
    "scale",
    keys={"query_pre_attn_scalar": 256},
    paths=("attention.scale",),
    read=lambda config, recipe: {} if attention_scale(config) is None else {"attention.scale": attention_scale(config)},
    write=lambda recipe, weights: {"query_pre_attn_scalar": query_pre_attn_scalar(recipe)},
    requires={"attention.scale": integer_scalar},
)


def capped(value: float | None) -> float | None:
    """A soft cap (``attn_logit_softcapping``, ``final_logit_softcapping``): None is none."""
    return None if value is None else float(value)


def local_global_ropes(family: str, local_base: str, local_default: float, *, pattern: int) -> tuple[Row, ...]:
    """Local and global layers (``layer_types``, else every ``sliding_window_pattern``-th global, by default
    ``pattern``; see ``layer_kinds.local_global_layers``), each kind with its own rope as transformers reads nested
    per-kind ``rope_parameters`` (YaRN always truncating): the global layers' of base ``rope_theta`` and 4.x
    ``rope_scaling``, the local layers' of base ``local_base`` (default ``local_default``); and the refusals of a
    partial rotation or another rope type in either (Gemma 3). The recipe's rope is the more common kind's."""
    return (
        *local_global_layers(
            family,
            None,
            lambda c: kind_ropes(c, {GLOBAL: c["rope_theta"], LOCAL: c[local_base]}, nested=True),
            keys={**ROPE.keys, local_base: local_default, "sliding_window_pattern": pattern},
            requires={**ROPE.requires, "positional.truncate": yarn_truncates(family)},
            legacy=("rope_theta", local_base, "rope_scaling", "sliding_window_pattern"),  # transformers 4's
        ),
        *rope_options_per_kind(f"{family}'s attention rotates every head dim", rope_type=True),
    )
