"""Qwen3-MoE (``Qwen3MoeForCausalLM``, Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention (per-head QK RMSNorm,
one ``attention_bias``) with a mixture of SwiGLU experts: a softmax router, the top-k experts weighted by their
probabilities (renormalised to sum to one with ``norm_topk_prob``), no shared expert. Layers in
``mlp_only_layers``, or off the ``decoder_sparse_step``, have a dense SwiGLU of ``intermediate_size`` (a
``layers:`` override, as Qwen2-MoE's); ``use_sliding_window`` gives every layer the ``sliding_window``.

Transformers 5 holds the experts fused in memory and its ``to_dict`` names their count ``num_local_experts``
(an alias of ``num_experts``); the published configs and ``save_pretrained``'s per-expert tensors both import.
"""

from __future__ import annotations

from typing import Any

from . import qwen2_moe as moe
from .mapping import Option, Rule
from .qwen3 import QWEN3, QWEN3_RULES
from .rows import GATED, hidden_act
from .table import Computed, Fixed, Key

MOE_RULES = (
    Rule(f"{moe.MLP}.gate.weight", f"{moe.FFN}.router.weight"),
    *moe.swiglu_rules(f"{moe.MLP}.experts.{{e}}", f"{moe.FFN}.experts.{{e}}"),
)
"""The router and the routed experts (on disk one tensor per expert; OLMoE's are named alike)."""


def _experts(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The experts, and the dense layers: those in ``mlp_only_layers`` or whose index + 1 is off the step."""
    act, n, step = GATED[config["hidden_act"]], config["num_hidden_layers"], config["decoder_sparse_step"]
    dense = [i for i in range(n) if i in (config["mlp_only_layers"] or []) or (i + 1) % step]
    count = config["num_local_experts"]
    return {
        "ffn.num_experts": config["num_experts"] if count is None else count,
        "ffn.expert": {**act, "hidden": config["moe_intermediate_size"]},
        "layers": moe.dense_override(dense, {**act, "hidden": config["intermediate_size"]}, n),
    }


def _hf_experts(recipe: Any, weights: Any) -> dict[str, Any]:
    width = moe.weight_rows(weights, recipe, False, "experts.0.up_proj.weight")
    return {
        "hidden_act": hidden_act(recipe.ffn.expert),
        "num_experts": recipe.ffn.num_experts,
        "moe_intermediate_size": width,
        # No dense layer reads intermediate_size: the published configs give the top-k experts' width.
        "intermediate_size": moe.weight_rows(weights, recipe, True, "up_proj.weight") or width * recipe.ffn.top_k,
        "decoder_sparse_step": 1,
        "mlp_only_layers": moe.dense_layers(recipe),
    }


EXPERTS = Computed(
    "experts",
    keys={"hidden_act": "silu", "num_experts": 128, "num_local_experts": None, "moe_intermediate_size": 768}
    | {"intermediate_size": 6144, "decoder_sparse_step": 1, "mlp_only_layers": None},
    paths=("ffn.num_experts", "ffn.expert", "layers"),
    read=_experts,
    write=_hf_experts,
    requires={"ffn.expert": moe.fits_experts, "layers": moe.only_dense_ffns_differ},
    legacy=("num_local_experts",),  # what transformers 5's to_dict calls num_experts
)

WINDOW = Computed(  # every layer slides, or none: Qwen3MoeConfig has no max_window_layers nor layer_types
    "sliding window",
    keys={"use_sliding_window": False, "sliding_window": 4096},
    paths=("attention.window",),
    read=lambda c, r: {"attention.window": c["sliding_window"] if c["use_sliding_window"] else None},
    write=lambda r, w: {"use_sliding_window": r.attention.window is not None, "sliding_window": r.attention.window},
)

QWEN3_MOE = QWEN3.derive(
    "qwen3_moe",
    classes=("Qwen3MoeForCausalLM",),
    rules=(*QWEN3_RULES, *MOE_RULES),
    layout=moe.split_fused_experts,
    recipes=("qwen3-30b-a3b", "qwen3-235b-a22b"),
    drop=("layer_types", "gated ffn", "ffn.bias"),  # Qwen2's sliding layers, their option; the dense FFN
    rows=(
        WINDOW,
        Fixed("ffn.type", "moe"),
        Key("num_experts_per_tok", "ffn.top_k", 8),
        Key("norm_topk_prob", "ffn.normalize", False, read=bool),
        Key("router_aux_loss_coef", "ffn.aux_loss_coef", 0.001),
        EXPERTS,
        Option("num_experts", lambda v: v is None or v >= 1, "a config without experts is a dense Qwen3 model"),
        Option("num_local_experts", lambda v: v is None or v >= 1, "a config without experts is a dense Qwen3 model"),
        Option("decoder_sparse_step", lambda v: v >= 1, "the MoE layers are those whose index + 1 it divides"),
    ),
    defaults={"head_dim": None, "num_key_value_heads": 4, "hidden_size": 2048, "num_hidden_layers": 24},
)
