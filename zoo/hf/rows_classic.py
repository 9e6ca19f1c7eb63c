"""Rows that the classic families share (``zoo/hf/table.py``): the two-layer MLP, learned positions and multi-head
attention of GPT-2, BERT and ViT, and the pre-norm stack around them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .mapping import ACTIVATIONS, HF_ACTIVATIONS, activation_option, default_head_dim, no_layer_overrides
from .rows import BIAS_FIELDS
from .table import Computed, Fixed, Key, Require, Row

UP = "blocks.0.ffn.up_proj.weight"
"""The first block's up projection: its rows are the FFN width a config states."""


def width(key: str, default: Any, weight: str = UP, read: Callable | None = None, owns: tuple = ()) -> Computed:
    """The FFN width ``key`` (``ffn.hidden``); the width exported is the rows of ``weight``, as a recipe may leave
    it to d_model (``owns``: other fields that only set the width)."""
    return Computed(
        "width",
        keys={key: default},
        paths=("ffn.hidden", *owns),
        read=read or (lambda config, recipe: {"ffn.hidden": config[key]}),
        write=lambda recipe, weights: {key: weights[weight].shape[0]},
    )


def mlp(key: str, default: str, family: str) -> tuple[Row, ...]:
    """A two-layer MLP whose activation is ``key`` (HF's name <-> zoo's; refused where zoo's would differ)."""
    return (
        Fixed("ffn.type", "mlp"),
        Key(key, "ffn.activation", default, read=ACTIVATIONS.__getitem__, write=HF_ACTIVATIONS.__getitem__),
        Require("ffn.activation", tuple(HF_ACTIVATIONS)),
        activation_option(key, family),
    )


def mha(heads: str, default: int, dropout: str, dropout_default: float) -> tuple[Row, ...]:
    """Multi-head attention of ``heads`` heads of d_model / heads features (the config has no head width), with
    its ``dropout`` on the attention weights."""
    return (
        Fixed("attention.type", "mha"),
        Key(heads, "attention.num_heads", default),
        Require("attention.head_dim", default_head_dim),
        Key(dropout, "attention.dropout", dropout_default),
    )


def biases(on: bool) -> Computed:
    """The four attention projections all biased (zoo's default) or none; the config states neither."""

    def check(recipe: Any) -> str | None:
        found = recipe.attention.biases()
        shown = "/".join(str(found[p]) for p in "qkvo")
        wanted = "all four" if on else "none"
        return None if set(found.values()) == {on} else f"attention biases q/k/v/o are {shown}, needs {wanted}"

    return Computed(
        "biases",
        keys={},
        paths=BIAS_FIELDS,
        read=lambda config, recipe: {} if on else {"attention.bias": False},
        write=lambda recipe, weights: {},
        requires={"attention.biases": check},
    )


BIASED = biases(True)

LEARNED = Fixed("positional.type", "learned")

PRE_NORM: tuple[Row, ...] = (
    Fixed("block.norm_position", "pre"),
    Fixed("embed_norm", None, also=(False,), imported=False),
    Fixed("final_norm", None, also=(True,), imported=False),
    Require("layers", no_layer_overrides),
)
"""GPT-2's, ViT's and T5's stack: each block normalises its input, a final norm closes the stack."""
