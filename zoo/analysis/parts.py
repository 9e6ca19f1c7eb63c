"""The parts of a built model and what each costs: the components of the module tree, costed by their configs.

``zoo.build`` records, for every module a registered component built, its config and the ``BuildContext``
of its place (``model.zoo_components``). The parts are those components, each costed by its own config's
``cost(ctx)`` (``zoo.cost``); a component nested in another (an MoE's experts) is in its parent's cost.
Nothing here knows how an architecture arranges its blocks: a meta-device build tells (it allocates
nothing and takes milliseconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn

from zoo.cost import Cost

from .folding import layer_of

__all__ = ["HELD", "Part", "held_parts", "layer_of", "model_parts"]


@dataclass(frozen=True)
class Part:
    """One component of the model."""

    path: str
    """Its module path in the built model, e.g. ``blocks.3.attention``."""
    kind: str
    name: str
    cost: Cost | None
    """None when the component's config declares no cost (a plugin's)."""
    causal: bool = False
    """It sits in a causal stack: an attention's keys and values (or a mixer's state) are cached when decoding."""
    cross: bool = False
    """An attention over the encoder output."""
    tokens: int | None = None
    """The tokens it sees per sequence where that is fixed and not the model's sequence length: the patches (and
    [CLS]) of a dual-encoder's image tower, the frames of an audio encoder."""
    context: int | None = None
    """A cross-attention's keys where the encoder's length is fixed (an audio encoder's frames): it scores that
    many keys and projects that many keys and values once per sequence (``context_matmul``)."""
    context_matmul: int = 0
    """Of ``cost.matmul``, the weight elements multiplied per context token (the key and value projections)."""

    @property
    def layer(self) -> str:
        return layer_of(self.path)


def model_parts(model: nn.Module | str | Path | Mapping[str, Any]) -> list[Part]:
    """Every component of a model built by ``zoo.build`` (or of a recipe, built on the meta device), in
    module order, with its declared cost."""
    if not isinstance(model, nn.Module):
        from zoo.builder import build

        model = build(model, device="meta")
    parts, seen = [], set()
    decodes = callable(getattr(model, "new_cache", None))  # a model that never decodes caches nothing
    images = tuple(f"{tower}." for tower in getattr(model, "image_towers", ()))
    fixed = model.tower_tokens() if callable(getattr(model, "tower_tokens", None)) else {}  # prefix -> tokens
    context = next((n for prefix, n in fixed.items() if prefix == "encoder."), None)  # what cross-attention reads
    for path, made in getattr(model, "zoo_components", {}).items():
        if made.kind == "architecture" or made.nested or made.config is None or made.ctx is None:
            continue
        cost = made.config.cost(made.ctx)
        held = {id(p) for p in model.get_submodule(path).parameters()}
        if cost is not None and held and held <= seen:  # another layer's weights (layer_groups): counted there
            cost = replace(cost, params=0, active=0)
        seen |= held
        tokens = made.ctx.max_len if path.startswith(images) else None
        tokens = next((n for prefix, n in fixed.items() if path.startswith(prefix)), tokens)
        causal = made.ctx.causal and decodes
        part = Part(path, made.kind, made.name, cost, causal=causal, cross=made.ctx.cross, tokens=tokens)
        if made.ctx.cross and context is not None and cost is not None:
            part = replace(part, context=context, context_matmul=2 * made.ctx.d_model * cost.kv_width)
        parts.append(part)
    return parts + held_parts(model, seen)


HELD = "block"
"""The kind of the parameters a block holds itself, outside its components (layer scale's vectors)."""


def held_parts(model: nn.Module, seen: set[int]) -> list[Part]:
    """The parameters modules hold themselves, outside every component, that they declare with ``held_cost()``
    (a block's layer scale): one part per such module, of kind ``block``."""
    out = []
    for path, module in model.named_modules():
        held_cost = getattr(module, "held_cost", None)
        cost = held_cost() if callable(held_cost) else None
        if cost is None:
            continue
        held = {id(p) for p in module.parameters(recurse=False)}
        if held and held <= seen:  # another layer's weights (layer_groups): counted there
            cost = replace(cost, params=0, active=0)
        seen |= held
        out.append(Part(path, HELD, "layer_scale", cost))
    return out
