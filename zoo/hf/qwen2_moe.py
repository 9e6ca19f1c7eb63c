"""Qwen2-MoE (``Qwen2MoeForCausalLM``): Qwen2 with SwiGLU experts, a sigmoid-gated shared one, and dense layers."""

from __future__ import annotations

from . import _moe as moe
from ._moe import dense_override, fits_experts, only_dense_ffns_differ, swiglu_rules, weight_rows
from .llama import COMMON
from .mapping import Rule
from .qwen2 import QWEN2
from .rows import biases
from .table import Fixed
from .windows import no_sliding_layers

__all__ = ["QWEN2_MOE", "dense_override", "fits_experts", "only_dense_ffns_differ", "swiglu_rules", "weight_rows"]
GATE = Rule(f"{moe.MLP}.shared_expert_gate.weight", f"{moe.FFN}.shared_expert_gate.weight")

QWEN2_MOE = QWEN2.derive(
    "qwen2_moe",
    classes=("Qwen2MoeForCausalLM",),
    rules=(*COMMON, *moe.moe_rules(dense=True, shared="shared_expert"), GATE),
    layout=moe.split_fused_experts,
    recipes=("qwen1.5-moe-a2.7b",),
    drop=("sliding layers", "gated ffn", "ffn.bias"),
    rows=(
        biases("qkv_bias", False),
        *moe.router_rows("num_experts", 60, 4, normalize=False),
        Fixed("ffn.shared_expert_gate", True),
        moe.experts(1408, 5632, moe.SPARSE_STEP, shared=("shared_expert_intermediate_size", 5632)),
        *no_sliding_layers("qwen2_moe", "Qwen2-MoE's sliding layers (every other layer below max_window_layers)"),
        moe.at_least(
            "num_experts", "a Qwen2-MoE config without experts is a dense Qwen2 model: import it as model_type qwen2"
        ),
        moe.at_least(
            "decoder_sparse_step",
            "the MoE layers are those whose index + 1 is a multiple of decoder_sparse_step, which must be >= 1",
        ),
    ),
    defaults={"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16}
    | {"qkv_bias": True},
)
