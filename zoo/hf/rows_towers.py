"""Rows of a dual-encoder's two towers (``zoo/hf/table.py``): the pre-norm encoder layers CLIP and SigLIP share,
their weight names, and the config rows of one tower (``text_config``, ``vision_config``) read at the recipe's root
(``under`` re-roots the image tower's)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .mapping import ACTIVATIONS, HF_ACTIVATIONS, Rule
from .rows_classic import LEARNED, PRE_NORM, mha, mlp, width
from .rows_neox import linear_rules
from .table import Fixed, Key, Row

LAYER = ("self_attn.q_proj attention.q_proj", "self_attn.k_proj attention.k_proj", "self_attn.v_proj attention.v_proj")
LAYER += ("self_attn.out_proj attention.o_proj", "layer_norm1 attention_norm", "mlp.fc1 ffn.up_proj")
LAYER += ("mlp.fc2 ffn.down_proj", "layer_norm2 ffn_norm")
"""A tower's encoder layer: ``"<HF module> <zoo module>"`` pairs for ``linear_rules``."""

TOWER_RULES = (
    Rule("text_model.embeddings.token_embedding.weight", "text.embedding.token.weight"),
    Rule("text_model.embeddings.position_embedding.weight", "text.positional.embedding.weight"),
    *linear_rules("text_model.encoder.layers.{i}.", "text.blocks.{i}.", *LAYER),
    *linear_rules("text_model.", "text.", "final_layer_norm final_norm"),
    Rule("vision_model.embeddings.position_embedding.weight", "vision.positional.embedding.weight"),
    *linear_rules("vision_model.encoder.layers.{i}.", "vision.blocks.{i}.", *LAYER),
)
"""The weights both towers name alike: the text tower's tables, layers and final norm, the image tower's positions
and layers (its patch embedding, norms and head differ by family)."""

IGNORED = ("text_model.embeddings.position_ids", "vision_model.embeddings.position_ids")
"""The position ids both towers keep as buffers: always 0, 1, 2, ..."""


def tower(config: str, family: str, heads: int, act: str, ffn: int, dims: int, layers: int, eps: float) -> tuple:
    """The rows of a tower's config (``text_config``, ``vision_config``), at the recipe's root: pre-norm layers of
    multi-head attention and a two-layer MLP, learned positions, LayerNorms."""
    key = f"{config}.".__add__
    up = "text.blocks.0.ffn.up_proj.weight" if config == "text_config" else "blocks.0.ffn.up_proj.weight"
    rows: tuple[Any, ...] = (
        *mha(key("num_attention_heads"), heads, key("attention_dropout"), 0.0),
        *PRE_NORM,
        *(named_as(row, act) for row in mlp(key("hidden_act"), act, family)),
        width(key("intermediate_size"), ffn, weight=up),
        LEARNED,
        Key(key("hidden_size"), "d_model", dims),
        Key(key("num_hidden_layers"), "num_layers", layers),
        Fixed("norm.type", "layernorm"),
        Key(key("layer_norm_eps"), "norm.eps", eps),
        Fixed("layer_groups", None),
    )
    return rows


def named_as(row: Any, act: str) -> Any:
    """The activation key ``row`` writing the family's own name ``act`` for the function it names (SigLIP's
    ``gelu_pytorch_tanh``, not ``gelu_new``: the same formula, computed otherwise), other rows as they are."""
    if not isinstance(row, Key) or row.path != "ffn.activation":
        return row
    return replace(row, write=lambda value: act if ACTIVATIONS[act] == value else HF_ACTIVATIONS[value])


def image_tower(family: str, patch: int, act: str, eps: float, *rows: Row) -> tuple[Row, ...]:
    """The image tower's rows (``vision_config``), at the tower's root (``under("vision", ...)``): a vit of square
    patches whose own head only marks it as a tower, its ``rows`` (the patch embedding's and the pooling's) between."""
    return (
        Fixed("architecture", "vit"),
        Key("vision_config.image_size", "image_size", 224),
        Key("vision_config.patch_size", "patch_size", patch),
        Key("vision_config.num_channels", "num_channels", 3),
        Fixed("embedding.type", "patch"),
        Fixed("head.type", "embedding"),
        *rows,
        *tower("vision_config", family, 12, act, 3072, 768, 12, eps),
    )
