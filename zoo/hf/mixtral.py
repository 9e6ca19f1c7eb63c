"""Mixtral (``MixtralForCausalLM``): Llama's network with a top-k mixture of SwiGLU experts (``w1`` gate, ``w3``
up, ``w2`` down) whose top-k softmax probabilities are renormalised, and an optional ``sliding_window``. Transformers
5's experts fused in memory (``mlp.experts.gate_up_proj``, ``down_proj``) import too, as ``save_pretrained``'s.
"""

from __future__ import annotations

from ._moe import LAYER, gated_ffn_misfit, moe_rules, router_rows, unfuse_experts
from .llama import COMMON, LLAMA
from .rows import gated_ffn
from .table import Fixed, Key, Refused, Require

EXPERTS = (
    *router_rows("num_local_experts", 8, 2),
    gated_ffn("ffn.expert", "blocks.0.ffn.experts.0.up_proj.weight"),
    Require("ffn.expert", lambda recipe: gated_ffn_misfit(recipe.ffn.expert, "ffn.expert", None, "Mixtral's experts")),
)
"""Mixtral's experts, each a bias-free gated FFN of ``hidden_act`` and ``intermediate_size`` (Granite-MoE's too)."""

MIXTRAL = LLAMA.derive(
    "mixtral",
    classes=("MixtralForCausalLM",),
    rules=(*COMMON, *moe_rules(f"{LAYER}.block_sparse_moe", names=("w1", "w3", "w2"))),
    layout=unfuse_experts,
    recipes=("mixtral-8x7b",),
    drop=("attention_bias", "mlp_bias", "pretraining_tp", "sliding_window", "gated ffn"),
    rows=(
        Fixed("attention.bias", False),
        Key("sliding_window", "attention.window", None),
        *EXPERTS,
        Refused(
            "router_jitter_noise",
            lambda v: not v,
            "zoo's router does not multiply its input by training noise",
            export=0.0,
        ),
    ),
    defaults={"intermediate_size": 14336, "num_key_value_heads": 8, "max_position_embeddings": 4096 * 32}
    | {"rms_norm_eps": 1e-5, "rope_theta": 1e6},
)
