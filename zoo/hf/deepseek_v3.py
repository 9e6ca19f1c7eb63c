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
"""

from __future__ import annotations

from typing import Any

import torch

from zoo.components.positional import yarn_mscale
from zoo.errors import HFImportError

from ._llama_legacy import COMMON_REQUIREMENTS, LLAMA_OPTIONS
from .llama import COMMON, GATED, IGNORED, hidden_act
from .mapping import Family, Option, Rule, dtype_name
from .qwen2_moe import (
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
from .rope import ROPE_OPTIONS, hf_rope_parameters, rope_spec, scaling_parameters

ATTN, ZOO_ATTN = "model.layers.{i}.self_attn", "blocks.{i}.attention"

DEEPSEEK_V3_RULES = (
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

DEEPSEEK_V3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 129280,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": None,
    "n_shared_experts": 1,
    "n_routed_experts": 256,
    "routed_scaling_factor": 2.5,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "qk_nope_head_dim": 128,
    "n_group": 8,
    "topk_group": 4,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "norm_topk_prob": True,
    "hidden_act": "silu",
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "pad_token_id": None,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
    "rope_parameters": None,
    "rope_scaling": None,
    "rope_interleave": True,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001,  # not a DeepseekV3Config attribute; DeepSeek's own configs carry it
}
"""DeepseekV3Config's defaults of the keys the translation reads."""


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


DEEPSEEK_V3_OPTIONS = (
    *(o for o in LLAMA_OPTIONS if o.key in ("rope_parameters.partial_rotary_factor", "hidden_act")),
    *ROPE_OPTIONS,
    Option(
        "quantization_config",
        lambda v: v is None,
        "the weights are quantised (DeepSeek-V3's FP8 blocks with weight_scale_inv scales) and zoo reads plain "
        "tensors only; dequantise them to bf16 first (DeepSeek's inference/fp8_cast_bf16.py)",
    ),
    Option(
        "scoring_func",
        lambda v: v in (None, "sigmoid"),
        "DeepseekV3's router scores with a sigmoid (DeepSeek-V2's softmax routers are model_type deepseek_v2)",
    ),
    Option(
        "topk_method",
        lambda v: v in (None, "noaux_tc"),
        "DeepseekV3's router chooses by noaux_tc (groups by their two best scores, with the correction bias)",
    ),
    Option(
        "moe_layer_freq",
        lambda v: v in (None, 1),
        "DeepseekV3ForCausalLM makes every layer from first_k_dense_replace on an MoE layer",
    ),
    *(
        Option(key, _positive_int, f"{key} must be a positive integer (transformers cannot build the model otherwise)")
        for key in ("n_group", "topk_group", "num_experts_per_tok", "n_shared_experts", "v_head_dim")
    ),
    Option(
        "first_k_dense_replace",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        "first_k_dense_replace must be an integer >= 0 (the dense layers before the MoE ones)",
    ),
)

DEEPSEEK_V3_UNREAD = {
    "head_dim": "DeepseekV3Config sets it to qk_rope_head_dim (the dims RoPE rotates), which zoo reads",
    "qk_head_dim": "DeepseekV3Config sets it to qk_nope_head_dim + qk_rope_head_dim, which zoo reads",
    "num_nextn_predict_layers": "multi-token-prediction modules: DeepseekV3ForCausalLM builds none, and their "
    "weights (after the last layer) are dropped on import",
    "pretraining_tp": "how DeepSeek sliced the projections across devices to pretrain: the same matmuls",
}


def yarn_softmax_scale(qk_head_dim: int, params: dict[str, Any]) -> float | None:
    """``DeepseekV3Attention``'s softmax scale where it is not ``qk_head_dim ** -0.5`` (None there): with a scaled
    RoPE whose ``mscale_all_dim`` is set, that times ``yarn_mscale(factor, mscale_all_dim) ** 2``."""
    kind = params.get("rope_type") or params.get("type") or "default"
    mscale_all_dim = params.get("mscale_all_dim") or 0
    if kind == "default" or not mscale_all_dim:
        return None
    mscale = yarn_mscale(params["factor"], mscale_all_dim)
    return qk_head_dim ** (-0.5) * mscale * mscale


def deepseek_rope_spec(config: dict[str, Any]) -> dict[str, Any]:
    """zoo's rope spec: the general one (YaRN's with every parameter transformers reads), on interleaved pairs
    where ``rope_interleave`` says so."""
    return {**rope_spec(config), "interleaved": bool(config["rope_interleave"])}


def deepseek_v3_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    if kv_heads is not None and kv_heads != heads:
        raise HFImportError(
            f"num_key_value_heads={kv_heads} is not supported: multi-head latent attention expands its latent to "
            f"every one of the num_attention_heads={heads} heads (transformers too), so it must equal that or be null"
        )
    qk_nope, qk_rope = config["qk_nope_head_dim"], config["qk_rope_head_dim"]
    attention: dict[str, Any] = {
        "type": "mla",
        "num_heads": heads,
        "q_lora_rank": config["q_lora_rank"],
        "kv_lora_rank": config["kv_lora_rank"],
        "qk_nope_head_dim": qk_nope,
        "qk_rope_head_dim": qk_rope,
        "v_head_dim": config["v_head_dim"],
        "bias": bool(config["attention_bias"]),
        "dropout": config["attention_dropout"],
    }
    scale = yarn_softmax_scale(qk_nope + qk_rope, scaling_parameters(config))
    if scale is not None:
        attention["scale"] = scale
    act = GATED[config["hidden_act"]]
    ffn = {
        "type": "moe",
        "num_experts": config["n_routed_experts"],
        "top_k": config["num_experts_per_tok"],
        "expert": {**act, "hidden": config["moe_intermediate_size"]},
        "shared_expert": {**act, "hidden": config["moe_intermediate_size"] * config["n_shared_experts"]},
        "normalize": bool(config["norm_topk_prob"]),
        "scoring": "sigmoid",
        "correction_bias": True,
        "n_group": config["n_group"],
        "topk_group": config["topk_group"],
        "routed_scaling_factor": float(config["routed_scaling_factor"]),
        "aux_loss_coef": config["aux_loss_alpha"],
    }
    n, pad = config["num_hidden_layers"], config["pad_token_id"]
    embedding: dict[str, Any] = {"type": "token"}
    if pad is not None and 0 <= pad < config["vocab_size"]:
        embedding["padding_idx"] = pad
    dense = list(range(min(config["first_k_dense_replace"], n)))
    return {
        "architecture": "decoder",
        "vocab_size": config["vocab_size"],
        "pad_token_id": pad,
        "d_model": config["hidden_size"],
        "num_layers": n,
        "max_len": config["max_position_embeddings"],
        "norm_position": "pre",
        "embedding": embedding,
        "attention": attention,
        "positional": deepseek_rope_spec(config),
        "norm": {"type": "rmsnorm", "eps": config["rms_norm_eps"]},
        "ffn": ffn,
        "layers": dense_override(dense, {**act, "hidden": config["intermediate_size"]}, n),
        "head": {"type": "lm", "tie_embeddings": bool(config["tie_word_embeddings"])},
    }


def deepseek_v3_config(recipe, weights) -> dict[str, Any]:
    attention, ffn = recipe.attention, recipe.ffn
    expert = weight_rows(weights, recipe, False, "experts.0.up_proj.weight")
    shared = weight_rows(weights, recipe, False, "shared_expert.up_proj.weight")
    dense = dense_layers(recipe)
    return {
        "vocab_size": recipe.vocab_size,
        "hidden_size": recipe.d_model,
        "intermediate_size": weight_rows(weights, recipe, True, "up_proj.weight") or shared,
        "moe_intermediate_size": expert,
        "num_hidden_layers": recipe.num_layers,
        "num_attention_heads": attention.num_heads,
        "num_key_value_heads": attention.num_heads,
        "n_shared_experts": shared // expert,
        "n_routed_experts": ffn.num_experts,
        "routed_scaling_factor": ffn.routed_scaling_factor,
        "kv_lora_rank": attention.kv_lora_rank,
        "q_lora_rank": attention.q_lora_rank,
        "qk_rope_head_dim": attention.qk_rope_head_dim,
        "v_head_dim": attention.v_head_dim,
        "qk_nope_head_dim": attention.qk_nope_head_dim,
        "n_group": ffn.n_group,
        "topk_group": ffn.topk_group,
        "num_experts_per_tok": ffn.top_k,
        "first_k_dense_replace": len(dense),
        "norm_topk_prob": ffn.normalize,
        "hidden_act": hidden_act(ffn.expert),
        "max_position_embeddings": recipe.max_len,
        "rms_norm_eps": recipe.norm.eps,
        "tie_word_embeddings": recipe.head.tie_embeddings,
        "rope_parameters": hf_rope_parameters(recipe.positional),
        "rope_interleave": recipe.positional.interleaved,
        "attention_bias": attention.bias,
        "attention_dropout": attention.dropout,
        "num_nextn_predict_layers": 0,
        "aux_loss_alpha": ffn.aux_loss_coef,
        "pad_token_id": recipe.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "dtype": dtype_name(weights),
    }


def drop_mtp_modules(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The checkpoint without its multi-token-prediction modules (a layer with an ``eh_proj``: DeepSeek's
    ``model.layers.61``), which ``DeepseekV3ForCausalLM`` does not build either; experts unfused."""
    mtp = tuple(name.removesuffix("eh_proj.weight") for name in state if name.endswith(".eh_proj.weight"))
    return split_fused_experts({n: t for n, t in state.items() if not (mtp and n.startswith(mtp))})


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


DEEPSEEK_V3_REQUIREMENTS = {
    **{
        k: v for k, v in COMMON_REQUIREMENTS.items() if not k.startswith("attention.") and k != "positional.interleaved"
    },
    "attention.type": "mla",
    "attention.scale": scale_fits,
    "layers": dense_first,
    "ffn.type": "moe",
    "ffn.scoring": "sigmoid",
    "ffn.correction_bias": True,
    "ffn.shared_expert_gate": False,
    "ffn.experts": fits_moe,
}

DEEPSEEK_V3 = Family(
    name="deepseek_v3",
    model_type="deepseek_v3",
    classes=("DeepseekV3ForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=DEEPSEEK_V3_DEFAULTS,
    options=DEEPSEEK_V3_OPTIONS,
    rules=DEEPSEEK_V3_RULES,
    ignored=IGNORED,
    requirements=DEEPSEEK_V3_REQUIREMENTS,
    unread=DEEPSEEK_V3_UNREAD,
    recipe=deepseek_v3_recipe,
    config=deepseek_v3_config,
    hf_class=lambda recipe: "DeepseekV3ForCausalLM",
    layout=drop_mtp_modules,
    recipes=("deepseek-v3",),
)
