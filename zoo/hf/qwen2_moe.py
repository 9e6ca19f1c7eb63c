"""Qwen2-MoE (``Qwen2MoeForCausalLM``, Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention (biases on q, k
and v, none on o) with a mixture of SwiGLU experts whose top-k softmax probabilities are used as they are
(``norm_topk_prob: false``) and a shared SwiGLU expert scaled by ``sigmoid(shared_expert_gate(x))``.

Layers in ``mlp_only_layers``, or not on the ``decoder_sparse_step``, have a plain SwiGLU of
``intermediate_size`` instead: zoo writes them as a ``layers:`` override of the FFN, and exports every such
layer in ``mlp_only_layers``.

Transformers 5 holds the experts fused in memory (``mlp.experts.gate_up_proj``, ``down_proj``) but
``save_pretrained`` writes one tensor per expert; both import. The helpers of this file serve DeepSeek-V3
(``zoo/hf/deepseek_v3.py``) too.
"""

from __future__ import annotations

from typing import Any

import torch

from zoo.errors import HFImportError

from ._llama_legacy import COMMON_REQUIREMENTS, LLAMA_OPTIONS, _config, _recipe
from .llama import ACTS, COMMON, GATED, IGNORED, hidden_act
from .mapping import Family, Option, Rule

LAYER, BLOCK = "model.layers.{i}", "blocks.{i}"
MLP, FFN = f"{LAYER}.mlp", f"{BLOCK}.ffn"
PROJECTIONS = ("gate", "up", "down")


def swiglu_rules(hf: str, zoo: str) -> tuple[Rule, ...]:
    """The three projections of a gated FFN, named alike on both sides (``gate_proj``, ``up_proj``, ``down_proj``)."""
    return tuple(Rule(f"{hf}.{p}_proj.weight", f"{zoo}.{p}_proj.weight") for p in PROJECTIONS)


DENSE_FFN_RULES = swiglu_rules(MLP, FFN)
"""The plain SwiGLU of a dense layer (the MoE layers' zoo names are ``ffn.router``, ``ffn.experts``, ...)."""

QWEN2_MOE_RULES = (
    *COMMON,
    *DENSE_FFN_RULES,
    Rule(f"{MLP}.gate.weight", f"{FFN}.router.weight"),
    *swiglu_rules(f"{MLP}.experts.{{e}}", f"{FFN}.experts.{{e}}"),
    *swiglu_rules(f"{MLP}.shared_expert", f"{FFN}.shared_expert"),
    Rule(f"{MLP}.shared_expert_gate.weight", f"{FFN}.shared_expert_gate.weight"),
)

QWEN2_MOE_DEFAULTS: dict[str, Any] = {
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "head_dim": None,  # Qwen2MoeConfig has none, but Qwen2MoeAttention reads one that a config.json gives
    "hidden_act": "silu",
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
    "rope_parameters": None,
    "rope_scaling": None,
    "use_sliding_window": False,
    "layer_types": None,
    "attention_dropout": 0.0,
    "decoder_sparse_step": 1,
    "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632,
    "num_experts_per_tok": 4,
    "num_experts": 60,
    "norm_topk_prob": False,
    "router_aux_loss_coef": 0.001,
    "mlp_only_layers": None,
    "qkv_bias": True,
    "pad_token_id": None,
}
"""Qwen2MoeConfig's defaults of the keys the translation reads."""

QWEN2_MOE_OPTIONS = (
    *LLAMA_OPTIONS,
    Option(
        "use_sliding_window",
        lambda v: not v,
        "zoo's qwen2_moe import builds full attention in every layer; Qwen2-MoE's sliding layers (every other "
        "layer below max_window_layers) are not translated",
    ),
    Option(
        "layer_types",
        lambda v: v is None or (isinstance(v, list) and all(t == "full_attention" for t in v)),
        "zoo's qwen2_moe import builds full_attention layers only",
    ),
    Option(
        "num_experts",
        lambda v: isinstance(v, int) and v >= 1,
        "a Qwen2-MoE config without experts is a dense Qwen2 model: import it as model_type qwen2",
    ),
    Option(
        "decoder_sparse_step",
        lambda v: isinstance(v, int) and v >= 1,
        "the MoE layers are those whose index + 1 is a multiple of decoder_sparse_step, which must be >= 1",
    ),
)

QWEN2_MOE_UNREAD = {
    "sliding_window": "the window of use_sliding_window, which is refused (transformers sets it to 0 without)",
    "max_window_layers": "which layers would slide with use_sliding_window, which is refused",
}


# ---------------------------------------------------------------------------------------------- dense layers


def dense_override(layers: list[int], ffn: dict[str, Any], num_layers: int) -> list[dict[str, Any]]:
    """The ``layers:`` override that gives ``layers`` the dense ``ffn`` (none when there are no such layers).

    Raises:
        HFImportError: every layer is dense (a dense model of another family).
    """
    if not layers:
        return []
    if len(layers) == num_layers:
        raise HFImportError(
            f"every one of the {num_layers} layers is dense (no MoE layer): this is a dense model; import it "
            "as the dense family (qwen2, llama)"
        )
    contiguous = layers == list(range(len(layers)))
    return [{"select": f":{len(layers)}" if contiguous else layers, "ffn": ffn}]


def dense_layers(recipe: Any) -> list[int]:
    """The indices of the layers whose FFN is not the recipe's MoE (a ``layers:`` override replaced it)."""
    return [i for i, placed in enumerate(recipe.layer_plan("decoder")) if placed["ffn"][1] != "ffn"]


def gated_ffn_misfit(ffn: Any, where: str, act: str | None) -> str | None:
    """Why ``ffn`` (a config or spec dict) is not a bias-free gated FFN of activation ``act``, or None."""
    spec = ffn if isinstance(ffn, dict) else ffn.model_dump()
    if spec.get("type") not in ACTS:
        return f"{where}.type is {spec.get('type')!r}, needs one of {', '.join(map(repr, ACTS))}"
    if spec.get("bias"):
        return f"{where}.bias is True, needs False (these FFNs have no biases)"
    if act is not None and hidden_act(spec) != act:
        return f"{where} computes {hidden_act(spec)}, but the experts {act}: the family has one hidden_act"
    return None


def only_dense_ffns_differ(recipe: Any) -> str | None:
    """A requirement: ``layers:`` overrides only swap the MoE for one bias-free gated FFN of the experts'
    activation, the same in every dense layer (the family's config has one ``intermediate_size``)."""
    expert = recipe.ffn.expert if recipe.ffn.type == "moe" else None
    act = hidden_act(expert) if expert is not None and expert.type in ACTS else None
    dense = None
    for j, override in enumerate(recipe.layers):
        if override.attention is not None or override.norm is not None:
            return f"layers.{j}: overrides an attention or a norm; only the FFN may differ per layer (dense layers)"
        if override.ffn is None:
            continue
        problem = gated_ffn_misfit(override.ffn, f"layers.{j}.ffn", act)
        if problem:
            return problem
        if dense is not None and override.ffn != dense:
            return f"layers.{j}.ffn differs from another dense layer's; the family has one intermediate_size"
        dense = override.ffn
    return None


def fits_experts(recipe: Any) -> str | None:
    """A requirement: routed and shared experts are bias-free gated FFNs of one activation."""
    act = hidden_act(recipe.ffn.expert) if recipe.ffn.expert.type in ACTS else None
    problem = gated_ffn_misfit(recipe.ffn.expert, "ffn.expert", None)
    if problem is None and recipe.ffn.shared_expert is not None:
        problem = gated_ffn_misfit(recipe.ffn.shared_expert, "ffn.shared_expert", act)
    return problem


def split_fused_experts(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Transformers 5's in-memory experts -> the per-expert layout that ``save_pretrained`` writes.

    ``mlp.experts.gate_up_proj`` (X, 2H, E) holds each expert's gate then up projection, ``mlp.experts.down_proj``
    (X, E, H) each expert's down projection. Other tensors pass unchanged.
    """
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        experts, _, leaf = name.rpartition(".")
        if experts.endswith(".mlp.experts") and leaf == "gate_up_proj":
            for e, (gate, up) in enumerate(zip(*tensor.chunk(2, dim=1), strict=True)):
                out[f"{experts}.{e}.gate_proj.weight"], out[f"{experts}.{e}.up_proj.weight"] = gate, up
        elif experts.endswith(".mlp.experts") and leaf == "down_proj":
            for e, down in enumerate(tensor.unbind(0)):
                out[f"{experts}.{e}.down_proj.weight"] = down
        else:
            out[name] = tensor
    return out


def first_layer(recipe: Any, dense: bool) -> int | None:
    """The index of the first dense (or MoE) layer, None if there is none."""
    layers = dense_layers(recipe)
    return next((i for i in range(recipe.num_layers) if (i in layers) == dense), None)


def weight_rows(weights: dict[str, torch.Tensor], recipe: Any, dense: bool, leaf: str) -> int | None:
    """The rows of ``blocks.{i}.ffn.{leaf}`` in the first dense (or MoE) layer: its hidden width; None if none."""
    i = first_layer(recipe, dense)
    return None if i is None else weights[f"blocks.{i}.ffn.{leaf}"].shape[0]


# ---------------------------------------------------------------------------------------------- qwen2_moe


def qwen2_moe_recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    act = GATED[config["hidden_act"]]
    ffn = {
        "type": "moe",
        "num_experts": config["num_experts"],
        "top_k": config["num_experts_per_tok"],
        "expert": {**act, "hidden": config["moe_intermediate_size"]},
        "shared_expert": {**act, "hidden": config["shared_expert_intermediate_size"]},
        "shared_expert_gate": True,
        "normalize": bool(config["norm_topk_prob"]),
        "aux_loss_coef": config["router_aux_loss_coef"],
    }
    bias = bool(config["qkv_bias"])
    recipe = _recipe(config, ffn, bias)
    if bias:
        recipe["attention"]["o_bias"] = False
    n, step, only = config["num_hidden_layers"], config["decoder_sparse_step"], config["mlp_only_layers"] or []
    dense = [i for i in range(n) if i in only or (i + 1) % step]
    recipe["layers"] = dense_override(dense, {**act, "hidden": config["intermediate_size"]}, n)
    return recipe


def qwen2_moe_config(recipe, weights) -> dict[str, Any]:
    ffn = recipe.ffn
    shared = weight_rows(weights, recipe, False, "shared_expert.up_proj.weight")
    return {
        **_config(recipe, weights, ffn.expert, f"blocks.{first_layer(recipe, False)}.ffn.experts.0.up_proj.weight"),
        "intermediate_size": weight_rows(weights, recipe, True, "up_proj.weight") or shared,
        "qkv_bias": recipe.attention.biases()["q"],
        "use_sliding_window": False,
        "decoder_sparse_step": 1,
        "mlp_only_layers": dense_layers(recipe),
        "moe_intermediate_size": weight_rows(weights, recipe, False, "experts.0.up_proj.weight"),
        "shared_expert_intermediate_size": shared,
        "num_experts": ffn.num_experts,
        "num_experts_per_tok": ffn.top_k,
        "norm_topk_prob": ffn.normalize,
        "router_aux_loss_coef": ffn.aux_loss_coef,
    }


def qkv_biases(recipe: Any) -> str | None:
    """A requirement: one bias setting for q, k and v (``qkv_bias``), none on the output projection."""
    on = recipe.attention.biases()
    if on["o"] or not on["q"] == on["k"] == on["v"]:
        return f"attention biases are {on}, need q, k and v alike and none on o (Qwen2-MoE's qkv_bias)"
    return None


BIAS_KEYS = ("attention.q_bias", "attention.k_bias", "attention.v_bias", "attention.o_bias")

ROUTER_DEFAULTS = {
    "ffn.scoring": "softmax",
    "ffn.correction_bias": False,
    "ffn.n_group": 1,
    "ffn.topk_group": 1,
    "ffn.routed_scaling_factor": 1.0,
}
"""The router of Mixtral and Qwen2-MoE: a softmax, no bias, no groups, no scaling."""

QWEN2_MOE_REQUIREMENTS = {
    **{k: v for k, v in COMMON_REQUIREMENTS.items() if k not in BIAS_KEYS},
    "attention.window": None,
    "attention.biases": qkv_biases,
    "layers": only_dense_ffns_differ,
    "ffn.type": "moe",
    **ROUTER_DEFAULTS,
    "ffn.shared_expert_gate": True,
    "ffn.experts": fits_experts,
}

QWEN2_MOE = Family(
    name="qwen2_moe",
    model_type="qwen2_moe",
    classes=("Qwen2MoeForCausalLM",),
    base_prefix="model.",
    head_prefixes=("lm_head.",),
    defaults=QWEN2_MOE_DEFAULTS,
    options=QWEN2_MOE_OPTIONS,
    rules=QWEN2_MOE_RULES,
    ignored=IGNORED,
    requirements=QWEN2_MOE_REQUIREMENTS,
    unread=QWEN2_MOE_UNREAD,
    recipe=qwen2_moe_recipe,
    config=qwen2_moe_config,
    hf_class=lambda recipe: "Qwen2MoeForCausalLM",
    layout=split_fused_experts,
    recipes=("qwen1.5-moe-a2.7b",),
)
