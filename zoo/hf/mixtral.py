"""Mixtral (``MixtralForCausalLM``): Llama's network with a top-k mixture of SwiGLU experts (``w1`` gate, ``w3``
up, ``w2`` down) whose top-k softmax probabilities are renormalised, and an optional ``sliding_window`` (the
attention's ``window``). Transformers 5 holds the experts fused in memory (``mlp.experts.gate_up_proj``,
``down_proj``) but ``save_pretrained`` writes the per-expert layout; both import.
"""

from __future__ import annotations

from typing import Any

from ._moe import unfuse_experts
from .llama import BLOCK, COMMON, LAYER, LLAMA
from .mapping import Rule
from .rows import ACTS, gated_ffn
from .table import Fixed, Key, Refused, Require

MOE, EXPERT = f"{LAYER}.block_sparse_moe", f"{BLOCK}.ffn.experts.{{e}}"

MIXTRAL_RULES = (
    *COMMON,
    Rule(f"{MOE}.gate.weight", f"{BLOCK}.ffn.router.weight"),
    Rule(f"{MOE}.experts.{{e}}.w1.weight", f"{EXPERT}.gate_proj.weight"),
    Rule(f"{MOE}.experts.{{e}}.w3.weight", f"{EXPERT}.up_proj.weight"),
    Rule(f"{MOE}.experts.{{e}}.w2.weight", f"{EXPERT}.down_proj.weight"),
)


def _fits_expert(recipe: Any) -> str | None:
    expert = recipe.ffn.expert
    if expert.type not in ACTS:
        return f"ffn.expert.type is {expert.type!r}, needs one of {', '.join(map(repr, ACTS))}"
    if getattr(expert, "bias", False):
        return "ffn.expert.bias is True, needs False (Mixtral's experts have no biases)"
    return None


MIXTRAL = LLAMA.derive(
    "mixtral",
    classes=("MixtralForCausalLM",),
    rules=MIXTRAL_RULES,
    layout=unfuse_experts,
    recipes=("mixtral-8x7b",),
    drop=("attention_bias", "mlp_bias", "pretraining_tp", "sliding_window", "gated ffn"),
    rows=(
        Fixed("attention.bias", False),
        Key("sliding_window", "attention.window", None),
        Fixed("ffn.type", "moe"),
        Key("num_local_experts", "ffn.num_experts", 8),
        Key("num_experts_per_tok", "ffn.top_k", 2),
        gated_ffn("ffn.expert", "blocks.0.ffn.experts.0.up_proj.weight"),
        Require("ffn.expert", _fits_expert),
        Key("router_aux_loss_coef", "ffn.aux_loss_coef", 0.001),
        Refused(
            "router_jitter_noise",
            lambda v: not v,
            "zoo's router does not multiply its input by training noise",
            export=0.0,
        ),
    ),
    defaults={
        "intermediate_size": 14336,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32,
        "rms_norm_eps": 1e-5,
        "rope_theta": 1e6,
    },
)
