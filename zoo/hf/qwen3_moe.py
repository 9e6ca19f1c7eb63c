"""Qwen3-MoE (``Qwen3MoeForCausalLM``, Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention with SwiGLU experts
(top-k softmax, renormalised with ``norm_topk_prob``), no shared expert, and Qwen2-MoE's dense layers."""

from __future__ import annotations

from . import _moe as moe
from .bloom import aliased
from .mapping import Option
from .qwen3 import QWEN3, QWEN3_RULES
from .table import Computed

WINDOW = Computed(  # every layer slides, or none: Qwen3MoeConfig has no max_window_layers nor layer_types
    "sliding window",
    keys={"use_sliding_window": False, "sliding_window": 4096},
    paths=("attention.window",),
    read=lambda c, r: {"attention.window": c["sliding_window"] if c["use_sliding_window"] else None},
    write=lambda r, w: {"use_sliding_window": r.attention.window is not None, "sliding_window": r.attention.window},
)
REQUIRES = {"ffn.expert": moe.fits_experts, "layers": moe.only_dense_ffns_differ}

QWEN3_MOE = QWEN3.derive(
    "qwen3_moe",
    classes=("Qwen3MoeForCausalLM",),
    rules=(*QWEN3_RULES, *moe.moe_rules()),
    layout=moe.split_fused_experts,
    recipes=("qwen3-30b-a3b", "qwen3-235b-a22b"),
    drop=("layer_types", "gated ffn", "ffn.bias"),  # Qwen2's sliding layers, their option; the dense FFN
    rows=(
        WINDOW,
        *moe.router_rows(None, 128, 8, normalize=False),
        aliased("num_experts", 128, "num_local_experts", "ffn.num_experts"),  # transformers 5 writes the alias
        moe.experts(768, 6144, moe.SPARSE_STEP, requires=REQUIRES),  # on ffn.expert
        Option("num_experts", lambda v: v is None or v >= 1, "a config without experts is a dense Qwen3 model"),
        Option("num_local_experts", lambda v: v is None or v >= 1, "a config without experts is a dense Qwen3 model"),
        Option("decoder_sparse_step", lambda v: v >= 1, "the MoE layers are those whose index + 1 it divides"),
    ),
    defaults={"head_dim": None, "num_key_value_heads": 4, "hidden_size": 2048, "num_hidden_layers": 24},
)
