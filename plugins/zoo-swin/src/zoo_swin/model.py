"""The ``swin`` architecture: a hierarchical vision Transformer (Swin, ``SwinForImageClassification``).

Patch embedding (``swin_patch``), then stages of pre-norm blocks whose attention is ``swin_window``; between
two stages a patch merging (``swin_merge``) halves the grid and doubles the width; a final norm, the mean of
the last grid's vectors and a classifier. ``d_model`` is the first stage's width (Swin's ``embed_dim``); stage
``s`` is ``d_model * 2**s`` wide. The stage layout (``depths``, ``heads``) and ``window_size`` are the
attention's fields, ``num_layers`` is ``sum(depths)`` (filled in when left out), and every block's norm and
FFN are the recipe's ``norm`` and ``ffn`` at its stage's width (``ffn: mlp`` with no ``hidden``: 4x the width)::

    architecture: swin
    d_model: 96
    image_size: 224
    patch_size: 4
    num_classes: 1000
    attention: {type: swin_window, window_size: 7, depths: [2, 2, 6, 2], heads: [3, 6, 12, 24]}
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Literal

import torch
from torch import nn

from zoo.architectures import ArchitectureConfig, ModelOutput
from zoo.architectures.blocks import head_losses
from zoo.architectures.stack import Make
from zoo.checkpoint import Pretrained

from .patches import SwinMergeConfig

__all__ = ["SwinArchitectureConfig", "SwinBlock", "SwinModel", "SwinStage", "build_swin", "stage_grids"]

ACCEPTED = {
    "embedding": ("swin_patch",),
    "positional": ("none",),
    "attention": ("swin_window",),
    "norm": ("layernorm",),
    "ffn": ("mlp",),
    "head": ("classification",),
}
"""The component types a swin recipe takes: its blocks are built by this architecture, not by zoo's stack."""


def stage_grids(image_size: int, patch_size: int, stages: int) -> list[int]:
    """The side of each stage's patch grid: ceil(image / patch), then halved (rounded up) at each merge."""
    side = -(-image_size // patch_size)
    grids = []
    for _ in range(stages):
        grids.append(side)
        side = -(-side // 2)
    return grids


class SwinArchitectureConfig(ArchitectureConfig):
    type: Literal["swin"] = "swin"
    token_input: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {
        "embedding": {"type": "swin_patch"},
        "positional": {"type": "none"},
        "norm": {"type": "layernorm", "eps": 1e-5},
        "ffn": {"type": "mlp"},
        "head": {"type": "classification", "pool": "mean"},
    }
    stacks: ClassVar[list[tuple[str, bool]]] = [("encoder", False)]
    requires: ClassVar[tuple[str, ...]] = ("image_size", "patch_size", "num_classes")
    unused: ClassVar[tuple[str, ...]] = (
        "max_len",
        "vocab_size",
        "type_vocab_size",
        "pad_token_id",
        "decoder_start_token_id",
        "num_decoder_layers",
        "layer_groups",
        "embed_norm",
        "final_norm",
        "train.task",
        "train.mask_prob",
        "train.tokenizer",
    )
    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {
            "architecture": "swin",
            "d_model": 8,
            "image_size": 16,
            "patch_size": 2,
            "num_classes": 5,
            "attention": {"type": "swin_window", "window_size": 4, "depths": [2, 1], "heads": [2, 2]},
        },
    )

    def derive(self, data: dict[str, Any]) -> None:
        """``num_layers`` is the stages' blocks, ``sum(attention.depths)``, unless the recipe says it."""
        attention = data.get("attention")
        depths = attention.get("depths", (2, 2, 6, 2)) if isinstance(attention, dict) else None
        if "num_layers" not in data and isinstance(depths, (list, tuple)) and all(isinstance(d, int) for d in depths):
            data["num_layers"] = sum(depths)

    def check_recipe(self, recipe) -> list[tuple[str, str]]:
        errors = super().check_recipe(recipe)
        for kind, types in ACCEPTED.items():
            given = getattr(getattr(recipe, kind), "type", None)
            if given not in types:
                errors.append((kind, f"architecture 'swin' takes {kind} {' or '.join(types)}, not {given}"))
        if getattr(recipe.head, "pool", "mean") != "mean":
            errors.append(("head.pool", "swin classifies the mean of the last stage's vectors: pool: mean"))
        if recipe.block != type(recipe.block)():
            errors.append(("block", "swin's blocks are pre-norm, x + f(norm(x)): leave block out"))
        for field in ("max_len", "vocab_size", "layer_groups", "embed_norm", "final_norm"):
            if getattr(recipe, field) is not None:
                errors.append((field, f"architecture 'swin' has no {field}: leave it out"))
        if recipe.layers:
            errors.append(("layers", "swin's blocks take their heads and shift from their stage: no layers: overrides"))
        if errors:
            return errors
        attention = recipe.attention
        if len(attention.depths) != len(attention.heads):
            return errors  # the attention's check says so
        grids = stage_grids(recipe.image_size, recipe.patch_size, len(attention.depths))
        for stage, (side, heads) in enumerate(zip(grids, attention.heads, strict=True)):
            width = recipe.d_model * 2**stage
            if width % heads:
                errors.append(
                    (
                        "attention.heads",
                        f"stage {stage + 1} is {width} wide (d_model * 2**{stage}): {heads} heads do not divide it",
                    )
                )
            if side < attention.window_size:
                errors.append(
                    (
                        "attention.window_size",
                        f"stage {stage + 1}'s patch grid is {side}x{side}, smaller than the {attention.window_size}x"
                        f"{attention.window_size} window (its bias table would not fit, in transformers too): lower "
                        "window_size or raise image_size",
                    )
                )
        return errors


class SwinBlock(nn.Module):
    """x + attention(norm(x)), then x + ffn(norm(x)), on the tokens of an (H, W) grid."""

    def __init__(
        self, *, attention: nn.Module, ffn: nn.Module, attention_norm: nn.Module, ffn_norm: nn.Module, dropout: float
    ) -> None:
        super().__init__()
        self.attention_norm = attention_norm
        self.attention = attention
        self.ffn_norm = ffn_norm
        self.ffn = ffn
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        x = x + self.dropout(self.attention(self.attention_norm(x), size=size))
        return x + self.dropout(self.ffn(self.ffn_norm(x)))


class SwinStage(nn.Module):
    """The blocks of one stage, then (except after the last) the patch merging."""

    def __init__(self, blocks: list[SwinBlock], merge: nn.Module | None) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.merge = merge

    def forward(self, x: torch.Tensor, size: tuple[int, int]) -> tuple[torch.Tensor, tuple[int, int]]:
        for block in self.blocks:
            x = block(x, size)
        return (x, size) if self.merge is None else self.merge(x, size)


class SwinModel(nn.Module, Pretrained):
    """Images (N, C, H, W) -> class logits (N, num_classes)."""

    def __init__(
        self,
        *,
        embedding: nn.Module,
        stages: list[SwinStage],
        final_norm: nn.Module,
        head: nn.Module,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.embed_dropout = nn.Dropout(dropout)
        self.stages = nn.ModuleList(stages)
        self.final_norm = final_norm
        self.head = head

    def forward(self, images: torch.Tensor, *, labels: torch.Tensor | None = None) -> ModelOutput:
        x, size = self.embedding(images)
        x = self.embed_dropout(x)
        for stage in self.stages:
            x, size = stage(x, size)
        h = self.final_norm(x)
        logits = self.head(h)
        loss, _ = head_losses(self.head, logits, labels, [])
        return ModelOutput(logits=logits, loss=loss, hidden_states=h)


def build_swin(recipe, make: Make) -> nn.Module:
    """Swin: patch embedding, stages of shifted-window blocks joined by patch merging, mean-pooled classifier."""
    attention = recipe.attention
    base = recipe.context(stack="encoder")
    stages = []
    for s, depth in enumerate(attention.depths):
        width = recipe.d_model * 2**s
        blocks = []
        for b in range(depth):
            i = sum(attention.depths[:s]) + b
            ctx = replace(recipe.context(layer_idx=i, stack="encoder", attention=attention), d_model=width)
            ctx = replace(ctx, num_heads=attention.heads[s], head_dim=width // attention.heads[s])
            blocks.append(
                SwinBlock(
                    attention=make("attention", attention, ctx),
                    ffn=make("ffn", recipe.ffn, ctx),
                    attention_norm=make("norm", recipe.norm, ctx),
                    ffn_norm=make("norm", recipe.norm, ctx),
                    dropout=recipe.dropout,
                )
            )
        last = s == len(attention.depths) - 1
        merge = None if last else make("embedding", SwinMergeConfig(), replace(base, d_model=width, layer_idx=i))
        stages.append(SwinStage(blocks, merge))
    final = replace(base, d_model=recipe.d_model * 2 ** (len(attention.depths) - 1))
    return SwinModel(
        embedding=make("embedding", recipe.embedding, base),
        stages=stages,
        final_norm=make("norm", recipe.norm, final),
        head=make("head", recipe.head, final),
        dropout=recipe.dropout,
    )
