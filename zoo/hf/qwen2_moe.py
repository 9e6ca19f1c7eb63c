"""Qwen2-MoE (``Qwen2MoeForCausalLM``, Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's table (biases on q, k and v,
one ``qkv_bias``, none on o) with a mixture of SwiGLU experts whose top-k softmax probabilities are used as they are
(``norm_topk_prob: false``) and a shared SwiGLU expert scaled by ``sigmoid(shared_expert_gate(x))``. Qwen2's
sliding-window layers are refused.

Layers in ``mlp_only_layers``, or not on the ``decoder_sparse_step``, have a plain SwiGLU of
``intermediate_size`` instead: zoo writes them as a ``layers:`` override of the FFN, and exports every such
layer in ``mlp_only_layers``.

Transformers 5 holds the experts fused in memory (``mlp.experts.gate_up_proj``, ``down_proj``) but
``save_pretrained`` writes one tensor per expert; both import (``zoo/hf/_moe.py``, which Qwen3-MoE reads here).
"""

from __future__ import annotations

from typing import Any

from ._moe import (
    DENSE_FFN_RULES,
    FFN,
    MLP,
    dense_layers,
    dense_override,
    fits_experts,
    only_dense_ffns_differ,
    split_fused_experts,
    swiglu_rules,
    weight_rows,
)
from .llama import COMMON
from .mapping import Rule
from .qwen2 import QWEN2
from .rows import GATED, biases, hidden_act
from .table import Computed, Fixed, Key, Refused, Unread

RULES = (
    *COMMON,
    *DENSE_FFN_RULES,
    Rule(f"{MLP}.gate.weight", f"{FFN}.router.weight"),
    *swiglu_rules(f"{MLP}.experts.{{e}}", f"{FFN}.experts.{{e}}"),
    *swiglu_rules(f"{MLP}.shared_expert", f"{FFN}.shared_expert"),
    Rule(f"{MLP}.shared_expert_gate.weight", f"{FFN}.shared_expert_gate.weight"),
)


def _experts(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The routed and shared experts, and the dense layers: in ``mlp_only_layers`` or off the sparse step."""
    act, n, step = GATED[config["hidden_act"]], config["num_hidden_layers"], config["decoder_sparse_step"]
    dense = [i for i in range(n) if i in (config["mlp_only_layers"] or []) or (i + 1) % step]
    return {
        "ffn.expert": {**act, "hidden": config["moe_intermediate_size"]},
        "ffn.shared_expert": {**act, "hidden": config["shared_expert_intermediate_size"]},
        "layers": dense_override(dense, {**act, "hidden": config["intermediate_size"]}, n),
    }


def _hf_experts(recipe: Any, weights: Any) -> dict[str, Any]:
    shared = weight_rows(weights, recipe, False, "shared_expert.up_proj.weight")
    return {
        "hidden_act": hidden_act(recipe.ffn.expert),
        "moe_intermediate_size": weight_rows(weights, recipe, False, "experts.0.up_proj.weight"),
        "shared_expert_intermediate_size": shared,
        "intermediate_size": weight_rows(weights, recipe, True, "up_proj.weight") or shared,  # no dense layer
        "decoder_sparse_step": 1,
        "mlp_only_layers": dense_layers(recipe),
    }


EXPERTS = Computed(
    "experts",
    keys={"hidden_act": "silu", "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632}
    | {"intermediate_size": 5632, "decoder_sparse_step": 1, "mlp_only_layers": None},
    paths=("ffn.expert", "ffn.shared_expert", "layers"),
    read=_experts,
    write=_hf_experts,
    requires={"ffn.experts": fits_experts, "layers": only_dense_ffns_differ},
)

QWEN2_MOE = QWEN2.derive(
    "qwen2_moe",
    classes=("Qwen2MoeForCausalLM",),
    rules=RULES,
    layout=split_fused_experts,
    recipes=("qwen1.5-moe-a2.7b",),
    drop=("sliding layers", "gated ffn", "ffn.bias"),
    rows=(
        biases("qkv_bias", False),
        Fixed("ffn.type", "moe"),
        Key("num_experts", "ffn.num_experts", 60),
        Key("num_experts_per_tok", "ffn.top_k", 4),
        Key("norm_topk_prob", "ffn.normalize", False, read=bool),
        Key("router_aux_loss_coef", "ffn.aux_loss_coef", 0.001),
        Fixed("ffn.shared_expert_gate", True),
        EXPERTS,
        Refused(
            "use_sliding_window",
            lambda v: not v,
            "zoo's qwen2_moe import builds full attention in every layer; Qwen2-MoE's sliding layers (every other "
            "layer below max_window_layers) are not translated",
            export=False,
        ),
        Refused(
            "layer_types",
            lambda v: v is None or (isinstance(v, list) and all(t == "full_attention" for t in v)),
            "zoo's qwen2_moe import builds full_attention layers only",
        ),
        Refused(
            "num_experts",
            lambda v: isinstance(v, int) and v >= 1,
            "a Qwen2-MoE config without experts is a dense Qwen2 model: import it as model_type qwen2",
        ),
        Refused(
            "decoder_sparse_step",
            lambda v: isinstance(v, int) and v >= 1,
            "the MoE layers are those whose index + 1 is a multiple of decoder_sparse_step, which must be >= 1",
        ),
        Unread(
            "sliding_window", "the window of use_sliding_window, which is refused (transformers sets it to 0 without)"
        ),
        Unread("max_window_layers", "which layers would slide with use_sliding_window, which is refused"),
    ),
    defaults={
        "hidden_size": 2048,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "max_position_embeddings": 32768,
        "qkv_bias": True,
    },
)
