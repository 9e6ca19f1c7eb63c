"""DeepSeek-V2 (``DeepseekV2ForCausalLM``, DeepSeek-V2 and V2-Lite, DeepSeek-Coder-V2): DeepSeek-V3's multi-head
latent attention (``mla``; RoPE on interleaved pairs, YaRN's ``mscale_all_dim`` in the softmax scale) and
``first_k_dense_replace`` dense SwiGLU layers, then a mixture of SwiGLU experts with ``n_shared_experts`` experts'
width of shared expert. Its router is V2's: softmax scores, the top-k taken greedily or among the ``topk_group``
groups of ``n_group`` with the best single scores (``group_limited_greedy``: zoo's ``group_scoring: max``), never
renormalised (transformers' ``DeepseekV2TopkRouter`` ignores ``norm_topk_prob``, so a config asking for it is
refused), then scaled by ``routed_scaling_factor``.
"""

from __future__ import annotations

from typing import Any

from zoo.errors import HFImportError

from ._moe import split_fused_experts
from .deepseek_v3 import RULES as DEEPSEEK_V3_RULES
from .deepseek_v3 import dense_first, fits_moe, read_experts, scale_fits, write_experts, yarn_softmax_scale
from .llama import IGNORED, LLAMA
from .mapping import Option
from .rope import scaling_parameters
from .rows import rope
from .table import Computed, Fixed, Key, Refused, Unread

MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
METHODS = ("greedy", "group_limited_greedy")


def read_heads(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    if kv_heads not in (None, heads):  # DeepseekV2Attention's latent gives every head its own keys
        raise HFImportError(f"num_key_value_heads={kv_heads}: multi-head latent attention needs it to be {heads}")
    out = {"attention.type": "mla", "attention.num_heads": heads, **{f"attention.{k}": config[k] for k in MLA_KEYS}}
    qk = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    return {**out, "attention.scale": yarn_softmax_scale(qk, scaling_parameters(config))}


def write_heads(recipe: Any, weights: Any) -> dict[str, Any]:
    attention = recipe.attention
    return {"num_attention_heads": attention.num_heads, "num_key_value_heads": attention.num_heads} | {
        k: getattr(attention, k) for k in MLA_KEYS
    }


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


def positive(key: str) -> Option:
    return Option(key, lambda v: isinstance(v, int) and v >= 1, f"DeepseekV2 needs {key} to be a positive integer")


DEEPSEEK_V2 = LLAMA.derive(
    "deepseek_v2",
    classes=("DeepseekV2ForCausalLM",),
    rules=DEEPSEEK_V3_RULES,
    ignored=IGNORED,
    layout=split_fused_experts,
    recipes=("deepseek-v2-lite", "deepseek-v2"),
    drop=("mlp_bias", "sliding_window", "gated ffn", "layers"),
    rows=(
        Computed(
            "heads",
            keys={"num_attention_heads": 32, "num_key_value_heads": None, "q_lora_rank": 1536, "kv_lora_rank": 512}
            | {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128},
            paths=("attention.type", "attention.num_heads", "attention.scale", *(f"attention.{k}" for k in MLA_KEYS)),
            read=read_heads,
            write=write_heads,
            requires={"attention.type": "mla", "attention.scale": scale_fits},
        ),
        rope(interleaved=True),  # DeepseekV2's complex rotation, on the qk_rope_head_dim dims
        Fixed("ffn.type", "moe"),
        Key("n_routed_experts", "ffn.num_experts", 64),
        Key("num_experts_per_tok", "ffn.top_k", None),
        Key("routed_scaling_factor", "ffn.routed_scaling_factor", 1.0, read=float),
        Key("aux_loss_alpha", "ffn.aux_loss_coef", 0.001),  # DeepSeek's own configs carry it
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
        Computed(
            "experts",
            keys={"hidden_act": "silu", "moe_intermediate_size": 1407, "n_shared_experts": 2}
            | {"intermediate_size": 11008, "first_k_dense_replace": 0},
            paths=("ffn.expert", "ffn.shared_expert", "layers"),
            read=read_experts,
            write=write_experts,
            requires={"ffn.experts": fits_moe, "layers": dense_first},
        ),
        Refused("topk_method", lambda v: v in METHODS, "DeepseekV2's router chooses greedily or group_limited_greedy"),
        Refused(
            "norm_topk_prob",
            lambda v: not v,
            "transformers' DeepseekV2TopkRouter never renormalises the top-k weights whatever it says (DeepSeek's "
            "own code does): the checkpoint's intent and transformers' network differ",
            export=False,
        ),
        Refused("mlp_bias", lambda v: not v, "DeepSeek-V2's gated FFNs in zoo have no biases", export=False),
        *(positive(key) for key in ("num_experts_per_tok", "n_routed_experts", "n_shared_experts")),
        Refused("scoring_func", lambda v: v in (None, "softmax"), "DeepseekV2's router scores with a softmax"),
        Refused("moe_layer_freq", lambda v: v in (None, 1), "every layer from first_k_dense_replace on is MoE"),
        Refused("quantization_config", lambda v: v is None, "zoo reads plain tensors: dequantise them first"),
        Unread("head_dim", "DeepseekV2Config sets it to qk_rope_head_dim, which zoo reads"),
        Unread("qk_head_dim", "DeepseekV2Config sets it to qk_nope_head_dim + qk_rope_head_dim, which zoo reads"),
        Unread("output_router_logits", "whether forward also returns the router logits: an output, not the network"),
    ),
    defaults={
        "vocab_size": 102400,
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-6,
    },
)
