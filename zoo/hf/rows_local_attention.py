"""Rows of an encoder that attends locally, or locally and to global tokens (LongT5's ``encoder_attention_type``):
zoo's ``local`` and ``transient_global`` attention, the weights of each kind and the positional encoding each reads
(T5's buckets, with the global tokens' table for transient-global)."""

from __future__ import annotations

from typing import Any

from .mapping import Rule
from .table import Computed, Refused

HF_KINDS = {"local": "LocalSelfAttention", "transient-global": "TransientGlobalSelfAttention"}
"""Each ``encoder_attention_type`` and the module that holds its weights in an encoder layer."""
ZOO_KINDS = {"local": "local", "transient-global": "transient_global"}
"""Each ``encoder_attention_type`` and zoo's attention of it."""
POSITIONAL = {"local": "t5_relative", "transient_global": "t5_global_relative"}
"""zoo's attention of each kind and the stack's positional encoding it reads."""


def encoder_kind(recipe: Any) -> str:
    """The ``encoder_attention_type`` of a recipe's attention (local for one of another type: refused on export)."""
    return {v: k for k, v in ZOO_KINDS.items()}.get(recipe.attention.type, "local")


def encoder_rules(hf_kind: str) -> tuple[Rule, ...]:
    """The weights of the encoder attention of ``hf_kind`` (a value of ``HF_KINDS``), for recipes of that kind."""
    when = lambda recipe: HF_KINDS[encoder_kind(recipe)] == hf_kind  # noqa: E731
    layer, first = f"encoder.block.{{i}}.layer.0.{hf_kind}", f"encoder.block.0.layer.0.{hf_kind}"
    zoo = "encoder.blocks.{i}.attention"
    rules = [Rule(f"{layer}.{p}.weight", f"{zoo}.{p}_proj.weight", when=when) for p in "qkvo"]
    tables = ["relative_attention_bias"]
    if hf_kind == HF_KINDS["transient-global"]:
        tables.append("global_relative_attention_bias")
        rules.append(Rule(f"{layer}.global_input_layer_norm.weight", f"{zoo}.global_norm.weight", when=when))
    rules += [Rule(f"{first}.{t}.weight", f"encoder.positional.{t}.weight", when=when) for t in tables]
    return tuple(rules)


def _read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    kind = ZOO_KINDS[config["encoder_attention_type"]]
    out = {
        "attention.type": kind,
        "attention.local_radius": config["local_radius"],
        "positional.type": POSITIONAL[kind],
    }
    if kind == "transient_global":  # its global tokens' norm is a layer norm of LongT5's, of the one eps
        out.update({"attention.global_block_size": config["global_block_size"]})
        out.update({"attention.global_norm_eps": config["layer_norm_epsilon"]})
    return out


def _write(recipe: Any, weights: Any) -> dict[str, Any]:
    attention = recipe.attention
    return {
        "encoder_attention_type": encoder_kind(recipe),
        "local_radius": attention.local_radius,
        "global_block_size": getattr(attention, "global_block_size", 16),  # local attention has none: the default
    }


def fits_encoder(recipe: Any) -> str | None:
    """A requirement: local or transient-global attention over the encoding it reads, one eps for every norm."""
    attention = recipe.attention
    if attention.type not in POSITIONAL:
        return f"attention.type is {attention.type!r}, needs 'local' or 'transient_global' (the encoder's attention)"
    wanted = POSITIONAL[attention.type]
    if recipe.positional.type != wanted:
        return f"positional.type is {recipe.positional.type!r}, needs {wanted!r} with {attention.type} attention"
    if attention.type == "transient_global" and attention.global_norm_eps != recipe.norm.eps:
        return (
            f"attention.global_norm_eps is {attention.global_norm_eps}, needs norm.eps ({recipe.norm.eps}): the "
            "config has one layer_norm_epsilon"
        )
    return None


ENCODER_ATTENTION = (
    Computed(
        "encoder attention",  # the decoder's self- and cross-attention are the same config's plain attention
        keys={"encoder_attention_type": "local", "local_radius": 127, "global_block_size": 16},
        paths=(
            "attention.type",
            "attention.local_radius",
            "attention.global_block_size",
            "attention.global_norm_eps",
            "positional.type",
        ),
        read=_read,
        write=_write,
        requires={"attention.type": fits_encoder},
    ),
    Refused("encoder_attention_type", lambda v: v in HF_KINDS, "the encoder attends 'local' or 'transient-global'"),
)
"""The encoder's attention, its radius and global blocks, and the positional encoding it reads."""
