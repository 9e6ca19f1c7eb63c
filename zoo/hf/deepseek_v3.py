"""DeepSeek-V3 (``DeepseekV3ForCausalLM``, DeepSeek-V3 / R1 and their fine-tunes): multi-head latent attention
(``mla``), RMSNorm pre-norm, RoPE on the rotary dims only (interleaved pairs, YaRN-scaled for long contexts),
``first_k_dense_replace`` dense SwiGLU layers and then a mixture of 256 SwiGLU experts: sigmoid scores,
a correction bias that chooses but does not weight, the best ``topk_group`` of ``n_group`` groups, renormalised
weights scaled by ``routed_scaling_factor``, and a shared expert of ``n_shared_experts`` experts' width.

The softmax scale is ``(qk_nope_head_dim + qk_rope_head_dim) ** -0.5``, times ``mscale²`` where YaRN's
``mscale_all_dim`` is set (``mscale = 0.1 · mscale_all_dim · ln(factor) + 1``), as ``DeepseekV3Attention``
computes it; zoo writes it into the attention's ``scale``.

The published checkpoints hold one multi-token-prediction module after the last layer (``model.layers.61``:
``enorm``, ``hnorm``, ``eh_proj``, ``shared_head`` and a whole decoder layer); transformers' class builds none and
neither does zoo: those weights are dropped on import. Their weights are FP8 with per-block scales
(``quantization_config``), refused: dequantise them to bf16 first.

The table is Llama's with the attention, rope and FFN rows replaced; Qwen2-MoE's would share only the routed
top-k and its dense layers (``zoo/hf/_moe.py``): its expert keys have other names and its attention rows all go.
"""

from __future__ import annotations

from typing import Any

import torch

from zoo.components.positional import yarn_mscale
from zoo.errors import HFImportError

from ._moe import (
    DENSE_FFN_RULES,
    FFN,
    MLP,
    dense_layers,
    dense_override,
    first_layer,
    fits_experts,
    only_dense_ffns_differ,
    split_fused_experts,
    swiglu_rules,
    weight_rows,
)
from .llama import COMMON, LLAMA
from .mapping import Rule
from .rope import hf_rope_parameters, rope_spec, scaling_parameters
from .rows import GATED, ROPE, hidden_act
from .table import Computed, Fixed, Key, Refused, Unread

ATTN, ZOO_ATTN = "model.layers.{i}.self_attn", "blocks.{i}.attention"

RULES = (
    *COMMON,  # embeddings, norms, head, and q_proj (without a q latent) and o_proj
    *(
        Rule(f"{ATTN}.{hf}.{kind}", f"{ZOO_ATTN}.{zoo}.{kind}")
        for hf, zoo in (("q_a_proj", "q_a_proj"), ("kv_a_proj_with_mqa", "kv_a_proj"))
        for kind in ("weight", "bias")
    ),
    Rule(f"{ATTN}.q_a_layernorm.weight", f"{ZOO_ATTN}.q_a_norm.weight"),
    Rule(f"{ATTN}.q_b_proj.weight", f"{ZOO_ATTN}.q_b_proj.weight"),
    Rule(f"{ATTN}.kv_a_layernorm.weight", f"{ZOO_ATTN}.kv_a_norm.weight"),
    Rule(f"{ATTN}.kv_b_proj.weight", f"{ZOO_ATTN}.kv_b_proj.weight"),
    *DENSE_FFN_RULES,
    Rule(f"{MLP}.gate.weight", f"{FFN}.router.weight"),
    Rule(f"{MLP}.gate.e_score_correction_bias", f"{FFN}.e_score_correction_bias"),
    *swiglu_rules(f"{MLP}.experts.{{e}}", f"{FFN}.experts.{{e}}"),
    *swiglu_rules(f"{MLP}.shared_experts", f"{FFN}.shared_expert"),
)


def drop_mtp_modules(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The checkpoint without its multi-token-prediction modules (a layer with an ``eh_proj``: DeepSeek's
    ``model.layers.61``), which ``DeepseekV3ForCausalLM`` does not build either; experts unfused."""
    mtp = tuple(name.removesuffix("eh_proj.weight") for name in state if name.endswith(".eh_proj.weight"))
    return split_fused_experts({n: t for n, t in state.items() if not (mtp and n.startswith(mtp))})


def _heads(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    if kv_heads is not None and kv_heads != heads:
        raise HFImportError(
            f"num_key_value_heads={kv_heads} is not supported: multi-head latent attention expands its latent to "
            f"every one of the num_attention_heads={heads} heads (transformers too), so it must equal that or be null"
        )
    return {"attention.num_heads": heads}


def yarn_softmax_scale(qk_head_dim: int, params: dict[str, Any]) -> float | None:
    """``DeepseekV3Attention``'s softmax scale where it is not ``qk_head_dim ** -0.5`` (None there): with a scaled
    RoPE whose ``mscale_all_dim`` is set, that times ``yarn_mscale(factor, mscale_all_dim) ** 2``."""
    kind = params.get("rope_type") or params.get("type") or "default"
    mscale_all_dim = params.get("mscale_all_dim") or 0
    if kind == "default" or not mscale_all_dim:
        return None
    mscale = yarn_mscale(params["factor"], mscale_all_dim)
    return qk_head_dim ** (-0.5) * mscale * mscale


def _scale(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    scale = yarn_softmax_scale(config["qk_nope_head_dim"] + config["qk_rope_head_dim"], scaling_parameters(config))
    return {} if scale is None else {"attention.scale": scale}


def scale_fits(recipe: Any) -> str | None:
    """A requirement: the attention's scale is the one DeepseekV3Attention derives from the head dims and YaRN."""
    attention = recipe.attention
    params = hf_rope_parameters(recipe.positional)
    expected = yarn_softmax_scale(attention.qk_nope_head_dim + attention.qk_rope_head_dim, params)
    if attention.scale != expected:
        shown = "the default" if expected is None else repr(expected)
        return (
            f"attention.scale is {attention.scale!r}, needs {shown} (DeepSeek-V3 derives its scale from "
            "qk_nope_head_dim + qk_rope_head_dim and YaRN's mscale_all_dim)"
        )
    return None


def read_experts(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The routed experts, the shared expert of ``n_shared_experts`` experts' width, the first k layers dense."""
    act, n, width = GATED[config["hidden_act"]], config["num_hidden_layers"], config["moe_intermediate_size"]
    dense = list(range(min(config["first_k_dense_replace"], n)))
    return {
        "ffn.expert": {**act, "hidden": width},
        "ffn.shared_expert": {**act, "hidden": width * config["n_shared_experts"]},
        "layers": dense_override(dense, {**act, "hidden": config["intermediate_size"]}, n),
    }


def write_experts(recipe: Any, weights: Any) -> dict[str, Any]:
    expert = weight_rows(weights, recipe, False, "experts.0.up_proj.weight")
    shared = weight_rows(weights, recipe, False, "shared_expert.up_proj.weight")
    return {
        "hidden_act": hidden_act(recipe.ffn.expert),
        "moe_intermediate_size": expert,
        "n_shared_experts": shared // expert,
        "intermediate_size": weight_rows(weights, recipe, True, "up_proj.weight") or shared,  # no dense layer
        "first_k_dense_replace": len(dense_layers(recipe)),
    }


def dense_first(recipe: Any) -> str | None:
    """A requirement: the dense layers (if any) come first (``first_k_dense_replace``), alike, of the experts'
    activation."""
    problem = only_dense_ffns_differ(recipe)
    if problem:
        return problem
    dense = dense_layers(recipe)
    if dense != list(range(len(dense))):
        return f"the dense layers are {dense}; DeepSeek-V3 has them first (first_k_dense_replace)"
    return None


def shared_expert_fits(recipe: Any) -> str | None:
    """A requirement: a shared expert as wide as a whole number of routed experts (``n_shared_experts``)."""
    shared, expert = recipe.ffn.shared_expert, recipe.ffn.expert
    if shared is None:
        return "ffn.shared_expert is None; DeepSeek-V3 has n_shared_experts >= 1"
    wide, unit = getattr(shared, "hidden", None), getattr(expert, "hidden", None)
    if wide is None or unit is None or wide % unit:
        return (
            f"ffn.shared_expert.hidden is {wide!r}, needs a multiple of ffn.expert.hidden ({unit!r}): "
            "DeepSeek-V3's shared expert is n_shared_experts routed experts wide"
        )
    return None


def fits_moe(recipe: Any) -> str | None:
    """A requirement: bias-free gated experts, a shared expert of whole experts, and at least one MoE layer."""
    if first_layer(recipe, False) is None:
        return "every layer is dense; DeepSeek-V3 has MoE layers after its first_k_dense_replace dense ones"
    return fits_experts(recipe) or shared_expert_fits(recipe)


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


DEEPSEEK_V3 = LLAMA.derive(
    "deepseek_v3",
    classes=("DeepseekV3ForCausalLM",),
    rules=RULES,
    layout=drop_mtp_modules,
    recipes=("deepseek-v3",),
    drop=("mlp_bias", "sliding_window", "gated ffn", "layers"),
    rows=(
        Computed(
            "heads",
            keys={"num_attention_heads": 128, "num_key_value_heads": None},
            paths=("attention.num_heads",),
            read=_heads,
            write=lambda recipe, weights: dict.fromkeys(
                ("num_attention_heads", "num_key_value_heads"), recipe.attention.num_heads
            ),
        ),
        Fixed("attention.type", "mla"),
        Key("q_lora_rank", "attention.q_lora_rank", 1536),
        Key("kv_lora_rank", "attention.kv_lora_rank", 512),
        Key("qk_nope_head_dim", "attention.qk_nope_head_dim", 128),
        Key("qk_rope_head_dim", "attention.qk_rope_head_dim", 64),
        Key("v_head_dim", "attention.v_head_dim", 128),
        Computed(
            "scale",
            keys={},
            paths=("attention.scale",),
            read=_scale,
            write=lambda recipe, weights: {},
            requires={"attention.scale": scale_fits},
        ),
        Computed(
            "rope",
            keys={**ROPE.keys, "rope_interleave": True},
            paths=ROPE.paths,
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
        Fixed("ffn.type", "moe"),
        Key("n_routed_experts", "ffn.num_experts", 256),
        Key("num_experts_per_tok", "ffn.top_k", 8),
        Key("norm_topk_prob", "ffn.normalize", True, read=bool),
        Fixed("ffn.scoring", "sigmoid"),
        Fixed("ffn.correction_bias", True),
        Key("n_group", "ffn.n_group", 8),
        Key("topk_group", "ffn.topk_group", 4),
        Key("routed_scaling_factor", "ffn.routed_scaling_factor", 2.5, read=float),
        Key("aux_loss_alpha", "ffn.aux_loss_coef", 0.001),  # not a DeepseekV3Config attribute; DeepSeek's configs
        Fixed("ffn.shared_expert_gate", False),
        Computed(
            "experts",
            keys={"hidden_act": "silu", "moe_intermediate_size": 2048, "n_shared_experts": 1}
            | {"intermediate_size": 18432, "first_k_dense_replace": 3},
            paths=("ffn.expert", "ffn.shared_expert", "layers"),
            read=read_experts,
            # no multi-token-prediction module: zoo builds none
            write=lambda recipe, weights: {**write_experts(recipe, weights), "num_nextn_predict_layers": 0},
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
            Refused(
                key, _positive_int, f"{key} must be a positive integer (transformers cannot build the model otherwise)"
            )
            for key in ("n_group", "topk_group", "num_experts_per_tok", "n_shared_experts", "v_head_dim")
        ),
        Refused(
            "first_k_dense_replace",
            lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
            "first_k_dense_replace must be an integer >= 0 (the dense layers before the MoE ones)",
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
    defaults={"vocab_size": 129280, "hidden_size": 7168, "num_hidden_layers": 61, "max_position_embeddings": 4096},
)
