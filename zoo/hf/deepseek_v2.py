"""DeepSeek-V2 (``DeepseekV2ForCausalLM``, V2, V2-Lite, Coder-V2): DeepSeek-V3's latent attention and dense-then-MoE
layers with V2's router: softmax scores, the top-k greedy or among the best ``topk_group`` of ``n_group`` groups by
their best score (zoo's ``group_scoring: max``), never renormalised, scaled by ``routed_scaling_factor``."""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from ._moe import FIRST_K, ROUTER_LOGITS, at_least, experts, fits_moe, router_rows, split_fused_experts
from .llama import IGNORED, LLAMA
from .rows import rope
from .rows_mla import RULES, mla_heads
from .table import Computed, Fixed, Key, Refused, Unread

METHODS = ("greedy", "group_limited_greedy")


def read_router(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    if config["topk_method"] == "greedy":
        return {}
    if config["n_group"] is None or config["topk_group"] is None:
        raise HFImportError("topk_method group_limited_greedy needs n_group and topk_group")
    return {"ffn.n_group": config["n_group"], "ffn.topk_group": config["topk_group"], "ffn.group_scoring": "max"}


def groups_fit(recipe: Any) -> str | None:
    ffn = recipe.ffn
    if ffn.n_group > 1 and ffn.group_scoring != "max":
        return f"ffn.group_scoring is {ffn.group_scoring!r}, needs 'max' (V2's groups score by their best expert)"
    return None


DEEPSEEK_V2 = LLAMA.derive(
    "deepseek_v2",
    classes=("DeepseekV2ForCausalLM",),
    rules=RULES,
    ignored=IGNORED,
    layout=split_fused_experts,
    recipes=("deepseek-v2-lite", "deepseek-v2"),
    drop=("mlp_bias", "sliding_window", "gated ffn", "layers"),
    rows=(
        mla_heads(32, "num_key_value_heads={kv_heads}: multi-head latent attention needs it to be {heads}"),
        rope(interleaved=True),  # DeepseekV2's complex rotation, on the qk_rope_head_dim dims
        *router_rows("n_routed_experts", 64, None, aux="aux_loss_alpha"),  # DeepSeek's own configs carry aux_loss_alpha
        Key("routed_scaling_factor", "ffn.routed_scaling_factor", 1.0, read=float),
        Fixed("ffn.normalize", False),
        Computed(
            "router",
            keys={"topk_method": "greedy", "n_group": None, "topk_group": None},
            paths=("ffn.n_group", "ffn.topk_group", "ffn.group_scoring"),
            read=read_router,
            write=lambda recipe, weights: {
                "topk_method": METHODS[recipe.ffn.n_group > 1],
                "n_group": recipe.ffn.n_group,
                "topk_group": recipe.ffn.topk_group,
            },
            requires={"ffn.group_scoring": groups_fit},
        ),
        experts(1407, 11008, FIRST_K, shared=("n_shared_experts", 2), per_expert=True, fits=fits_moe),
        Refused("topk_method", lambda v: v in METHODS, "DeepseekV2's router chooses greedily or group_limited_greedy"),
        Refused(
            "norm_topk_prob",
            lambda v: not v,
            "transformers' DeepseekV2TopkRouter never renormalises the top-k weights whatever it says (DeepSeek's "
            "own code does): the checkpoint's intent and transformers' network differ",
            export=False,
        ),
        Refused("mlp_bias", lambda v: not v, "DeepSeek-V2's gated FFNs in zoo have no biases", export=False),
        *(
            at_least(key, f"DeepseekV2 needs {key} to be a positive integer")
            for key in ("num_experts_per_tok", "n_routed_experts", "n_shared_experts")
        ),
        Refused("scoring_func", lambda v: v in (None, "softmax"), "DeepseekV2's router scores with a softmax"),
        Refused("moe_layer_freq", lambda v: v in (None, 1), "every layer from first_k_dense_replace on is MoE"),
        Refused("quantization_config", lambda v: v is None, "zoo reads plain tensors: dequantise them first"),
        Unread("head_dim", "DeepseekV2Config sets it to qk_rope_head_dim, which zoo reads"),
        Unread("qk_head_dim", "DeepseekV2Config sets it to qk_nope_head_dim + qk_rope_head_dim, which zoo reads"),
        ROUTER_LOGITS,
    ),
    defaults={"vocab_size": 102400, "hidden_size": 4096, "num_hidden_layers": 32, "max_position_embeddings": 2048}
    | {"rms_norm_eps": 1e-6},
)
