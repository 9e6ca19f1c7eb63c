"""Assemble a ``TransformerStack`` from a recipe: the one place architectures turn specs into blocks.

``make(kind, config, ctx)`` is handed in by ``zoo.build``; architectures never touch the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from torch import nn

from zoo.components.block import make_block

if TYPE_CHECKING:
    from zoo.config import BuildContext, ComponentConfig
    from zoo.recipe import Recipe

    Make = Callable[[str, ComponentConfig, BuildContext], nn.Module]
else:
    Make = Callable[..., Any]


def stack_parts(recipe: Recipe, make: Make, *, stack: str, causal: bool, cross: bool = False) -> dict[str, Any]:
    """Keyword arguments of a ``TransformerStack``: the blocks of ``stack`` with per-layer overrides
    applied, its positional encoding and its norms."""
    blocks = []
    for i, placed in enumerate(recipe.layer_plan(stack)):
        parts = {kind: config for kind, (config, _) in placed.items()}
        ctx = recipe.context(layer_idx=i, causal=causal, stack=stack, attention=parts["attention"])
        cross_ctx = replace(ctx, causal=False, cross=True)
        blocks.append(
            make_block(
                attention=make("attention", parts["attention"], ctx),
                ffn=make("ffn", parts["ffn"], ctx),
                norm=lambda parts=parts, ctx=ctx: make("norm", parts["norm"], ctx),
                cross_attention=make("attention", parts["attention"], cross_ctx) if cross else None,
                dropout=recipe.dropout,
                width=ctx.d_model,  # layer scale's vectors (block.layer_scale)
                **recipe.block.arguments(layer_idx=i),
            )
        )
    for i, block in enumerate(blocks):  # cross-layer sharing (layer_groups): the group's first layer's weights
        if (owner := recipe.weights_of(stack, i)) != i:
            share_weights(block, blocks[owner])
    pre = recipe.block.pre_norm
    embed_norm = recipe.embed_norm if recipe.embed_norm is not None else not pre
    final_norm = recipe.final_norm if recipe.final_norm is not None else pre
    ctx = recipe.context(causal=causal, stack=stack)
    width = getattr(recipe.embedding, "width", None)  # a factorized embedding: positions and norm at its width
    embedded = ctx if width is None else replace(ctx, d_model=width)
    return dict(
        positional=make("positional", recipe.positional, embedded),
        blocks=blocks,
        embed_norm=make("norm", recipe.norm, embedded) if embed_norm else nn.Identity(),
        final_norm=make("norm", recipe.norm, ctx) if final_norm else nn.Identity(),
        dropout=recipe.dropout,
        causal=causal,
    )


def share_weights(module: nn.Module, owner: nn.Module) -> None:
    """Make ``module`` hold ``owner``'s parameters, the same tensors (cross-layer sharing): both are built from
    one config, so their parameters have the same names and shapes. Buffers stay each module's own."""
    params = dict(owner.named_parameters())
    for name, _ in list(module.named_parameters()):
        parent, _, leaf = name.rpartition(".")
        setattr(module.get_submodule(parent), leaf, params[name])
