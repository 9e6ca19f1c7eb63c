"""Everything ``zoo summary`` shows, computed in one place: parameters, FLOPs, memory and torchinfo's module
tree with output shapes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from zoo.builder import build
from zoo.errors import ArgumentError, ZooError
from zoo.limits import MAX_SIZE, check_int
from zoo.recipe import Recipe, load_recipe

from .flops import FlopEstimate, flop_estimate
from .layers import LayerTable, input_family, layer_table
from .memory import MemoryEstimate, memory_estimate
from .params import Mismatch, ParameterCount, analytic_parameters, compare_counts, parameter_breakdown
from .parts import model_parts
from .sequence import default_seq_len

__all__ = ["ModelSummary", "summarize"]

CPU_MAX_PARAMETERS = 20_000_000
CPU_MAX_FLOPS = 10**10
"""Models this small (weights and one forward pass) are summarised with real tensors on the CPU, so that
even data-dependent layers run; larger ones are built on the meta device and never allocated."""
MAX_DEPTH = 100
"""The deepest torchinfo table asked for (no model nests deeper)."""


@dataclass
class ModelSummary:
    """The numbers of one recipe at one batch size and sequence length."""

    recipe: Recipe
    batch: int
    seq_len: int
    device: str
    """Where the model was built to be counted: ``cpu`` (small models) or ``meta``."""
    counted: ParameterCount
    analytic: ParameterCount
    mismatches: list[Mismatch]
    flops: FlopEstimate
    memory: MemoryEstimate
    layers: LayerTable | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def routed(self) -> bool:
        """True when a token uses fewer parameters than the model has (mixture of experts)."""
        return self.analytic.active is not None and self.analytic.active < self.analytic.total

    @property
    def torchinfo_note(self) -> str | None:
        """Why torchinfo's parameter total (``to_dict``'s raw figures; not printed) differs from zoo's, or None
        when they agree."""
        if self.layers is None or self.layers.total_params == self.counted.total:
            return None
        reported, true = self.layers.total_params, self.counted.total
        reasons = []
        if self.counted.tied:
            shared = "; ".join(f"{t.name} is {t.owner}, {t.numel:,}" for t in self.counted.tied)
            reasons.append(f"it counts a tied tensor once per module that holds it ({shared})")
        if self.layers.repeated:
            reasons.append(
                "it counts a module's parameters again each time the forward pass calls it "
                f"({', '.join(self.layers.repeated)})"
            )
        why = f": {'; and '.join(reasons)}" if reasons else ""
        return f"torchinfo reports {reported:,} parameters{why}. The model has {true:,}, each tensor counted once."

    def to_dict(self) -> dict[str, Any]:
        """Every number as plain JSON-ready data."""
        c, a = self.counted, self.analytic
        return {
            "recipe": self.recipe.name,
            "architecture": self.recipe.architecture,
            "batch": self.batch,
            "seq_len": self.seq_len,
            "built_on": self.device,
            "parameters": {
                "total": c.total,
                "trainable": c.trainable,
                "active": a.active,
                "routed": self.routed,
                "by_kind": c.by_kind,
                "by_layer": c.by_layer,
                "analytic": {"total": a.total, "by_kind": a.by_kind, "by_layer": a.by_layer, "missing": a.missing},
                "agree": not self.mismatches,
                "mismatches": [
                    {"where": m.where, "counted": m.counted, "analytic": m.analytic} for m in self.mismatches
                ],
                "tied": [{"name": t.name, "owner": t.owner, "numel": t.numel} for t in c.tied],
            },
            "flops": self.flops.to_dict(),
            "memory": self.memory.to_dict(),
            "torchinfo": {
                "forward": self.layers.forward,
                "note": self.layers.note,
                # torchinfo's totals as torchinfo counts them (a tied tensor once per module holding it; mult-adds
                # batch x each module's parameters; pass size twice the modules' outputs): not shown by the text
                # summary, whose parameters, flops and memory above are zoo's own.
                "raw_figures": {
                    "total_params": self.layers.total_params,
                    "total_params_note": self.torchinfo_note,
                    "mult_adds": self.layers.mult_adds,
                    "pass_bytes": self.layers.pass_bytes,
                    "param_bytes": self.layers.param_bytes,
                },
            }
            if self.layers
            else None,
            "notes": self.notes,
        }


def summarize(
    recipe: str | Path | Mapping[str, Any] | Recipe,
    *,
    batch: int = 1,
    seq_len: int | None = None,
    depth: int = 1,
    torchinfo: bool = True,
    width: int | None = None,
) -> ModelSummary:
    """Parameters (counted and analytic), FLOPs, memory and torchinfo's module tree of a recipe.

    Args:
        recipe: a path, a recipe name, a dict or a ``Recipe``.
        batch: sequences per batch (activations, KV cache and per-batch FLOPs).
        seq_len: tokens per sequence; default ``train.seq_len``, else 4096 capped at ``max_len`` (a vision
            model's is its patch count), said in the notes.
        depth: how deep torchinfo's tree goes (1: the model's direct children).
        width: the columns torchinfo's tree should fit in (default: torchinfo's own layer-name width).
        torchinfo: run torchinfo (False skips the layer table, e.g. to count many recipes fast).

    Raises:
        RecipeError: the recipe is invalid.
        ZooError: ``batch``, ``seq_len`` or ``depth`` is out of range (``ArgumentError``), or ``seq_len``
            does not fit the positional table.
    """
    batch = check_int("batch", batch, low=1)
    seq_len = None if seq_len is None else check_int("seq_len", seq_len, low=1)
    depth = check_int("depth", depth, low=0, high=MAX_DEPTH)
    if not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe)
    notes: list[str] = []
    if seq_len is None:
        seq_len, why = default_seq_len(recipe)
        if recipe.architecture != "vit":
            notes.append(f"{seq_len:,} tokens per sequence: {why}")
    model = build(recipe, device="meta")  # the module tree, free: its parts declare their costs
    plan = model_parts(model)
    analytic = analytic_parameters(plan)
    small = analytic.total <= CPU_MAX_PARAMETERS and (
        flop_estimate(plan, seq_len=seq_len, batch=batch).forward_per_batch <= CPU_MAX_FLOPS
    )
    if small:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = build(recipe, device="cpu")
    if input_family(model) == "images" and recipe.max_len and seq_len != recipe.max_len:
        notes.append(f"a vision model sees {recipe.max_len} tokens per image (patches + CLS): seq_len is that")
        seq_len = recipe.max_len
    if seq_len < 1:
        raise ZooError(f"seq_len must be >= 1, got {seq_len}")
    if batch * seq_len > MAX_SIZE:
        raise ArgumentError(f"batch x seq_len must be <= 2^31 - 1 tokens, got {batch:,} x {seq_len:,}")
    from zoo.recipe import positions_fit

    if positions_fit(recipe, seq_len) is not None:
        raise ZooError(
            f"seq_len {seq_len} exceeds max_len {recipe.max_len}: {recipe.positional.type} positions "
            "exist only below max_len"
        )
    counted = parameter_breakdown(model)
    table = layer_table(model, recipe, batch=batch, seq_len=seq_len, depth=depth, width=width) if torchinfo else None
    if table is not None and table.note:
        notes.append(table.note)
    return ModelSummary(
        recipe=recipe,
        batch=batch,
        seq_len=seq_len,
        device=next(model.parameters()).device.type,
        counted=counted,
        analytic=analytic,
        mismatches=compare_counts(counted, analytic),
        flops=flop_estimate(plan, seq_len=seq_len, batch=batch),
        memory=memory_estimate(
            plan, parameters=counted.total, batch=batch, seq_len=seq_len, max_len=recipe.stack_max_len("decoder")
        ),
        layers=table,
        notes=notes,
    )
