"""DeepSeek-V3 (``DeepseekV3ForCausalLM``, V3 / R1): Llama's stack with latent attention, ``first_k_dense_replace``
dense layers, then SwiGLU experts by sigmoid scores plus a correction bias (it chooses, does not weight) among the best
``topk_group`` of ``n_group`` groups, renormalised, scaled, and a shared expert; the MTP module is dropped on import."""

from __future__ import annotations

from dataclasses import replace

import torch

from ._moe import FIRST_K, at_least, dense_first, experts, fits_moe, router_rows, split_fused_experts
from .llama import LLAMA
from .rope import hf_rope_parameters, rope_spec
from .rows import ROPE
from .rows_mla import RULES, mla_heads
from .table import Fixed, Key, Refused, Unread


def drop_mtp_modules(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The checkpoint without its multi-token-prediction modules (a layer with an ``eh_proj``: DeepSeek's
    ``model.layers.61``), which ``DeepseekV3ForCausalLM`` does not build either; experts unfused."""
    mtp = tuple(name.removesuffix("eh_proj.weight") for name in state if name.endswith(".eh_proj.weight"))
    return split_fused_experts({n: t for n, t in state.items() if not (mtp and n.startswith(mtp))})


EXPERTS = experts(2048, 18432, FIRST_K, shared=("n_shared_experts", 1), per_expert=True)
POSITIVE = ("n_group", "topk_group", "num_experts_per_tok", "n_shared_experts", "v_head_dim")

DEEPSEEK_V3 = LLAMA.derive(
    "deepseek_v3",
    classes=("DeepseekV3ForCausalLM",),
    rules=RULES,
    layout=drop_mtp_modules,
    recipes=("deepseek-v3",),
    drop=("mlp_bias", "sliding_window", "gated ffn", "layers"),
    rows=(
        mla_heads(
            128,
            "num_key_value_heads={kv_heads} is not supported: multi-head latent attention expands its latent to "
            "every one of the num_attention_heads={heads} heads (transformers too), so it must equal that or be null",
        ),
        replace(
            ROPE,  # pairs interleaved by rope_interleave
            keys={**ROPE.keys, "rope_interleave": True},
            read=lambda config, recipe: {
                "positional": {**rope_spec(config), "interleaved": bool(config["rope_interleave"])}
            },
            write=lambda recipe, weights: {
                "rope_parameters": hf_rope_parameters(recipe.positional),
                "rope_interleave": recipe.positional.interleaved,
            },
            requires={k: v for k, v in ROPE.requires.items() if k != "positional.interleaved"},
            legacy=("rope_scaling", "rope_theta"),  # transformers 4's keys; rope_parameters holds the base
        ),
        # aux_loss_alpha: not a DeepseekV3Config attribute; DeepSeek's configs carry it
        *router_rows("n_routed_experts", 256, 8, normalize=True, aux="aux_loss_alpha"),
        Fixed("ffn.scoring", "sigmoid"),
        Fixed("ffn.correction_bias", True),
        Key("n_group", "ffn.n_group", 8),
        Key("topk_group", "ffn.topk_group", 4),
        Key("routed_scaling_factor", "ffn.routed_scaling_factor", 2.5, read=float),
        Fixed("ffn.shared_expert_gate", False),
        replace(  # no multi-token-prediction module: zoo builds none
            EXPERTS,
            write=lambda recipe, weights: {**EXPERTS.write(recipe, weights), "num_nextn_predict_layers": 0},
            requires={"layers": dense_first, "ffn.experts": fits_moe},
        ),
        Refused(
            "quantization_config",
            lambda v: v is None,
            "the weights are quantised (DeepSeek-V3's FP8 blocks with weight_scale_inv scales) and zoo reads plain "
            "tensors only; dequantise them to bf16 first (DeepSeek's inference/fp8_cast_bf16.py)",
        ),
        Refused(
            "scoring_func",
            lambda v: v in (None, "sigmoid"),
            "DeepseekV3's router scores with a sigmoid (DeepSeek-V2's softmax routers are model_type deepseek_v2)",
        ),
        Refused(
            "topk_method",
            lambda v: v in (None, "noaux_tc"),
            "DeepseekV3's router chooses by noaux_tc (groups by their two best scores, with the correction bias)",
        ),
        Refused(
            "moe_layer_freq",
            lambda v: v in (None, 1),
            "DeepseekV3ForCausalLM makes every layer from first_k_dense_replace on an MoE layer",
        ),
        *(
            at_least(k, f"{k} must be a positive integer (transformers cannot build the model otherwise)", bools=False)
            for k in POSITIVE
        ),
        at_least(
            "first_k_dense_replace",
            "first_k_dense_replace must be an integer >= 0 (the dense layers before the MoE ones)",
            0,
            bools=False,
        ),
        Unread("head_dim", "DeepseekV3Config sets it to qk_rope_head_dim (the dims RoPE rotates), which zoo reads"),
        Unread("qk_head_dim", "DeepseekV3Config sets it to qk_nope_head_dim + qk_rope_head_dim, which zoo reads"),
        Unread(
            "num_nextn_predict_layers",
            "multi-token-prediction modules: DeepseekV3ForCausalLM builds none, and their weights (after the last "
            "layer) are dropped on import",
        ),
        Unread("pretraining_tp", "how DeepSeek sliced the projections across devices to pretrain: the same matmuls"),
    ),
    defaults={"vocab_size": 129280, "hidden_size": 7168, "num_hidden_layers": 61, "max_position_embeddings": 4096}
    | {"first_k_dense_replace": 3},
)
