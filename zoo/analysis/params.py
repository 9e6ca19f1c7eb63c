"""Parameter counts two ways: counted on a built model, and declared by its components' configs (``cost``).

Both are broken down by component kind and by layer, so that where they disagree is visible. A tied
parameter (an LM head sharing the token table) is one tensor and is counted once, under the component that
holds it first (the embedding); ``ParameterCount.tied`` lists where it appears again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from zoo.recipe import Recipe

from .folding import layer_of
from .parts import HELD, Part, model_parts

__all__ = [
    "KIND_ORDER",
    "Mismatch",
    "ParameterCount",
    "TiedParameter",
    "analytic_parameters",
    "compare_counts",
    "component_owner",
    "parameter_breakdown",
]

KIND_ORDER: tuple[str, ...] = ("embedding", "positional", "attention", "ffn", "norm", "head")
"""The order kinds are reported in; any other kind (a plugin's, or ``architecture``) follows."""

MODEL_ROW = "(model)"
"""The per-layer row of parameters that the architecture module holds itself."""


@dataclass(frozen=True)
class TiedParameter:
    """A parameter reachable under a second name: ``name`` is the same tensor as ``owner``."""

    name: str
    owner: str
    numel: int


@dataclass
class ParameterCount:
    """A parameter total and its breakdowns; ``by_layer`` rows are blocks or the components outside them."""

    total: int
    by_kind: dict[str, int]
    by_layer: dict[str, int]
    active: int | None = None
    """Parameters a token passes through (routed experts: top_k of num_experts); analytic counts only."""
    trainable: int | None = None
    tied: list[TiedParameter] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Components whose config declares no cost: the analytic count leaves them out."""

    @property
    def with_duplicates(self) -> int:
        """The total when every tied name is counted again (what torchinfo reports)."""
        return self.total + sum(t.numel for t in self.tied)


@dataclass(frozen=True)
class Mismatch:
    """Where the counted and the analytic numbers differ: ``total``, ``kind <k>`` or ``layer <row>``."""

    where: str
    counted: int
    analytic: int

    @property
    def difference(self) -> int:
        return self.counted - self.analytic


def _ordered(counts: dict[str, int]) -> dict[str, int]:
    known = {k: counts[k] for k in KIND_ORDER if k in counts}
    return known | {k: v for k, v in counts.items() if k not in known}


def component_owner(module_path: str, provenance: dict) -> str | None:
    """The nearest enclosing module path (``module_path`` included) that a registered component built, not
    counting components nested inside another (an attention's q/k norms, an MoE's experts): their
    parameters are their parent's, as is their declared cost."""
    path = module_path
    while True:
        made = provenance.get(path)
        if made is not None and not getattr(made, "nested", False):
            return path
        if not path:
            return None
        path = path.rsplit(".", 1)[0] if "." in path else ""


def parameter_breakdown(model: nn.Module) -> ParameterCount:
    """Count the parameters of a built model by kind and layer, each tensor once.

    A parameter belongs to the nearest enclosing module that ``zoo.build`` recorded in
    ``model.zoo_components`` (its kind: ``attention``, ``ffn``, ...); parameters outside every component
    fall under ``other``. Works on the meta device.
    """
    provenance = getattr(model, "zoo_components", {})
    by_kind: dict[str, int] = {}
    by_layer: dict[str, int] = {}
    first_name: dict[int, str] = {}
    tied: list[TiedParameter] = []
    total = trainable = 0
    for path, made in provenance.items():  # every component gets its rows, parameters or not
        if path:
            by_kind.setdefault(made.kind, 0)
            by_layer.setdefault(layer_of(path), 0)
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first_name:
            tied.append(TiedParameter(name, first_name[id(p)], p.numel()))
            continue
        first_name[id(p)] = name
        module_path = name.rsplit(".", 1)[0] if "." in name else ""
        owner = component_owner(module_path, provenance)
        kind = provenance[owner].kind if owner is not None else "other"
        row = MODEL_ROW if owner == "" else layer_of(owner if owner is not None else module_path)
        if owner != module_path:  # a module that is no component holds it: a block's layer scale (held_parts)
            holder = model.get_submodule(module_path)
            if callable(getattr(holder, "held_cost", None)) and holder.held_cost() is not None:
                kind, row = HELD, layer_of(module_path)
        by_kind[kind] = by_kind.get(kind, 0) + p.numel()
        by_layer[row] = by_layer.get(row, 0) + p.numel()
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    return ParameterCount(total, _ordered(by_kind), by_layer, trainable=trainable, tied=tied)


def analytic_parameters(model: nn.Module | str | Path | Mapping[str, Any] | Iterable[Part]) -> ParameterCount:
    """Parameters as each component's config declares them (``cost``): of a built model, of a recipe (built
    on the meta device), or of parts from :func:`model_parts`."""
    if isinstance(model, (nn.Module, str, Path, Mapping, Recipe)):
        plan = model_parts(model)
    else:
        plan = list(model)
    by_kind: dict[str, int] = {}
    by_layer: dict[str, int] = {}
    missing: list[str] = []
    total = active = 0
    for part in plan:
        if part.cost is None:
            missing.append(f"{part.path} ({part.kind} '{part.name}')")
            continue
        by_kind[part.kind] = by_kind.get(part.kind, 0) + part.cost.params
        by_layer[part.layer] = by_layer.get(part.layer, 0) + part.cost.params
        total += part.cost.params
        active += part.cost.active_params
    return ParameterCount(total, _ordered(by_kind), by_layer, active=active, missing=missing)


def compare_counts(counted: ParameterCount, analytic: ParameterCount) -> list[Mismatch]:
    """Every total, kind and layer whose counted and analytic figures differ (empty when they agree)."""
    out = []
    if counted.total != analytic.total:
        out.append(Mismatch("total", counted.total, analytic.total))
    for label, a, b in (("kind", counted.by_kind, analytic.by_kind), ("layer", counted.by_layer, analytic.by_layer)):
        for key in list(a) + [k for k in b if k not in a]:
            if a.get(key, 0) != b.get(key, 0):
                out.append(Mismatch(f"{label} {key}", a.get(key, 0), b.get(key, 0)))
    return out
