"""Model accounting: parameters (counted and from formulas), FLOPs, memory, torchinfo's table, the component tree.

Everything here computes and returns data; nothing prints. ``zoo summary`` and ``zoo build`` render it.

    from zoo.analysis import summarize
    s = summarize("gpt2-small", seq_len=1024)
    s.counted.total, s.analytic.by_kind, s.flops.forward_per_token, s.memory.kv_bytes_per_token
"""

from __future__ import annotations

from zoo.cost import Cost

from .flops import FlopEstimate, flop_estimate
from .folding import LayerRow, fold_layer_rows, layer_of
from .layers import LayerTable, example_inputs, layer_table
from .memory import MemoryEstimate, memory_estimate
from .params import (
    KIND_ORDER,
    Mismatch,
    ParameterCount,
    TiedParameter,
    analytic_parameters,
    compare_counts,
    parameter_breakdown,
)
from .parts import Part, model_parts
from .summary import ModelSummary, summarize
from .tree import TreeNode, component_tree

__all__ = [
    "KIND_ORDER",
    "Cost",
    "FlopEstimate",
    "LayerRow",
    "LayerTable",
    "MemoryEstimate",
    "Mismatch",
    "ModelSummary",
    "ParameterCount",
    "Part",
    "TiedParameter",
    "TreeNode",
    "analytic_parameters",
    "compare_counts",
    "component_tree",
    "example_inputs",
    "flop_estimate",
    "fold_layer_rows",
    "layer_of",
    "layer_table",
    "memory_estimate",
    "model_parts",
    "parameter_breakdown",
    "summarize",
]
