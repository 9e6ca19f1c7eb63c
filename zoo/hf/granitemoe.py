"""Granite-MoE (``GraniteMoeForCausalLM``, IBM Granite 3.0 1B-A400M / 3B-A800M): Granite's network (its four muP
multipliers) with Mixtral's mixture of SwiGLU experts in place of the FFN. The checkpoint stacks each layer's
experts (``block_sparse_moe.input_linear.weight`` (X, 2H, E): each expert's gate rows, then its up rows;
``output_linear.weight`` (X, E, H)), imported one expert at a time and written back stacked.
"""

from __future__ import annotations

from ._moe import LAYER, moe_rules
from .granite import GRANITE
from .llama import COMMON
from .mixtral import EXPERTS
from .rows import stacked_experts

LAYOUT, HF_LAYOUT = stacked_experts(
    "block_sparse_moe", "input_linear.weight", "output_linear.weight", inputs_first=False
)

GRANITEMOE = GRANITE.derive(
    "granitemoe",
    classes=("GraniteMoeForCausalLM",),
    rules=(*COMMON, *moe_rules(f"{LAYER}.block_sparse_moe", router="router.layer")),
    layout=LAYOUT,
    hf_layout=HF_LAYOUT,
    recipes=("granite-3.0-1b-a400m",),
    drop=("mlp_bias", "gated ffn"),
    rows=EXPERTS,
    defaults={"num_local_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 11008},
)
