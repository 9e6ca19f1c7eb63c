"""Granite-MoE (``GraniteMoeForCausalLM``, IBM Granite 3.0 1B-A400M / 3B-A800M): Granite's network (its four muP
multipliers: the embedding's, the residual branches', the attention's scale and the logits' divisor) with
Mixtral's mixture of SwiGLU experts (a softmax over the top-k router logits) in place of the FFN.

The checkpoint stacks each layer's experts: ``block_sparse_moe.input_linear.weight`` (X, 2H, E: each expert's gate
rows, then its up rows) and ``output_linear.weight`` (X, E, H); they are imported one expert at a time and written
back stacked. The router is ``block_sparse_moe.router.layer.weight``.
"""

from __future__ import annotations

from .granite import GRANITE
from .llama import COMMON
from .mapping import Rule
from .mixtral import MIXTRAL
from .rows import stacked_experts
from .table import ident

MOE, FFN = "model.layers.{i}.block_sparse_moe", "blocks.{i}.ffn"
PROJ = ("gate", "up", "down")
LAYOUT, HF_LAYOUT = stacked_experts(
    "block_sparse_moe", "input_linear.weight", "output_linear.weight", inputs_first=False
)
EXPERT_ROWS = ("=ffn.type", "num_local_experts", "num_experts_per_tok", "router_aux_loss_coef", "~gated ffn.expert")

GRANITEMOE = GRANITE.derive(
    "granitemoe",
    classes=("GraniteMoeForCausalLM",),
    rules=(
        *COMMON,
        Rule(f"{MOE}.router.layer.weight", f"{FFN}.router.weight"),
        *(Rule(f"{MOE}.experts.{{e}}.{p}_proj.weight", f"{FFN}.experts.{{e}}.{p}_proj.weight") for p in PROJ),
    ),
    layout=(
        LAYOUT := stacked_experts("block_sparse_moe", "input_linear.weight", "output_linear.weight", inputs_first=False)
    )[0],
    hf_layout=LAYOUT[1],
    recipes=("granite-3.0-1b-a400m",),
    drop=("mlp_bias", "gated ffn"),
    rows=tuple(row for row in MIXTRAL.table.rows if ident(row) in (*EXPERT_ROWS, "?ffn.expert")),
    defaults={"num_local_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 11008},
)
