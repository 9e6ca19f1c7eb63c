"""The parts a recipe will build, where they sit, and what each costs: the model, read from the recipe alone.

The plan mirrors the module tree the built-in architectures build (``TransformerStack`` and ``Block``): per
stack a positional encoding, optional embed/final norms and blocks of (norm, attention, [norm, cross-attention],
norm, ffn); one embedding and one head per model. A model with several stacks prefixes its module paths with
the stack name (``encoder.blocks.0``), and every stack after the first attends to the first one's output
(the encoder-decoder's decoder). Nothing is built and no module is inspected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zoo.config import BuildContext
from zoo.plugins import get_registry
from zoo.recipe import Recipe, validate_spec

from .formulas import Cost, component_cost

__all__ = ["Part", "layer_of", "model_plan"]


@dataclass(frozen=True)
class Part:
    """One component of the planned model."""

    path: str
    """Its module path in the built model, e.g. ``blocks.3.attention``."""
    kind: str
    name: str
    cost: Cost | None
    """None when no formula is registered for this component (a plugin's)."""
    causal: bool = False
    """An attention in a causal stack: its keys and values are cached when decoding."""
    cross: bool = False
    """An attention over the encoder output."""

    @property
    def layer(self) -> str:
        return layer_of(self.path)


def layer_of(path: str) -> str:
    """The row of a per-layer table a module path belongs to: ``decoder.blocks.3`` or the path itself."""
    parts = path.split(".")
    for i in range(len(parts) - 1):
        if parts[i] == "blocks" and parts[i + 1].isdigit():
            return ".".join(parts[: i + 2])
    return path


def _nested_cost(ctx: BuildContext):
    registry = get_registry()

    def nested(kind: str, spec: Any) -> Cost | None:
        errors: list[tuple[str, str]] = []
        config = validate_spec(registry, kind, spec, kind, errors)
        return None if config is None else component_cost(config, ctx, nested)

    return nested


def _part(path: str, kind: str, config: Any, ctx: BuildContext, **flags: bool) -> Part:
    return Part(path, kind, config.type, component_cost(config, ctx, _nested_cost(ctx)), **flags)


def model_plan(recipe: Recipe) -> list[Part]:
    """Every component the recipe builds, with its cost, in build order."""
    architecture = get_registry().get("architecture", recipe.architecture).config()
    stacks: list[tuple[str, bool]] = list(getattr(architecture, "stacks", []))
    plan = [_part("embedding", "embedding", recipe.embedding, recipe.context())]
    pre = recipe.norm_position == "pre"
    for index, (stack, causal) in enumerate(stacks):
        prefix = f"{stack}." if len(stacks) > 1 else ""
        cross = index > 0
        ctx = recipe.context(causal=causal, stack=stack)
        plan.append(_part(f"{prefix}positional", "positional", recipe.positional, ctx))
        # The same defaults as the stack builder: post-norm normalises the embeddings, pre-norm the output.
        if recipe.embed_norm if recipe.embed_norm is not None else not pre:
            plan.append(_part(f"{prefix}embed_norm", "norm", recipe.norm, ctx))
        for i in range(recipe.stack_layers(stack)):
            block = f"{prefix}blocks.{i}"
            layer = recipe.layer_components(stack, i)
            ctx_i = recipe.context(layer_idx=i, causal=causal, stack=stack)
            plan.append(_part(f"{block}.attention_norm", "norm", layer["norm"], ctx_i))
            plan.append(_part(f"{block}.attention", "attention", layer["attention"], ctx_i, causal=causal))
            if cross:
                plan.append(_part(f"{block}.cross_attention_norm", "norm", layer["norm"], ctx_i))
                plan.append(_part(f"{block}.cross_attention", "attention", layer["attention"], ctx_i, cross=True))
            plan.append(_part(f"{block}.ffn_norm", "norm", layer["norm"], ctx_i))
            plan.append(_part(f"{block}.ffn", "ffn", layer["ffn"], ctx_i))
        if recipe.final_norm if recipe.final_norm is not None else pre:
            plan.append(_part(f"{prefix}final_norm", "norm", recipe.norm, ctx))
    plan.append(_part("head", "head", recipe.head, recipe.context()))
    return plan
