"""What DeepSeek-V2 and DeepSeek-V3 share: multi-head latent attention (``mla``) as their configs say it, its weight
names with the rest of their weight table, and the softmax scale ``DeepseekV3Attention`` (and V2's) derives from the
head dims and YaRN's ``mscale_all_dim``. Their experts' rows are in ``zoo/hf/_moe.py`` (``FIRST_K``, ``fits_moe``).
"""

from __future__ import annotations

from typing import Any

from zoo.components.positional import yarn_mscale
from zoo.errors import HFImportError

from ._moe import DENSE_FFN_RULES, FFN, MLP, at_least, swiglu_rules
from .llama import COMMON
from .mapping import Rule
from .rope import hf_rope_parameters, scaling_parameters
from .table import Computed, Fixed, Key, Refused, Unread

MLA_KEYS = {
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
}
"""The latent ranks and head widths, each a config key and a field of zoo's ``mla`` attention, with the defaults of
``DeepseekV2Config`` and ``DeepseekV3Config``."""


def heads_keys(attention: Any, *, latents: bool = False) -> dict[str, Any]:
    """The head counts of an ``mla`` attention as V2's and V3's configs say them (the latent gives every head its own
    keys: as many key-value heads), with ``latents`` the ranks and widths of ``MLA_KEYS`` too."""
    heads = dict.fromkeys(("num_attention_heads", "num_key_value_heads"), attention.num_heads)
    return heads | ({k: getattr(attention, k) for k in MLA_KEYS} if latents else {})


ATTN, ZOO_ATTN = "model.layers.{i}.self_attn", "blocks.{i}.attention"
LATENTS = (("q_a_proj", "q_a_proj"), ("kv_a_proj_with_mqa", "kv_a_proj"))

RULES = (
    *COMMON,  # embeddings, norms, head, and q_proj (without a q latent) and o_proj
    *(Rule(f"{ATTN}.{hf}.{kind}", f"{ZOO_ATTN}.{zoo}.{kind}") for hf, zoo in LATENTS for kind in ("weight", "bias")),
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
"""DeepSeek-V2's and V3's weight table."""


def yarn_softmax_scale(qk_head_dim: int, params: dict[str, Any]) -> float | None:
    """``DeepseekV3Attention``'s softmax scale where it is not ``qk_head_dim ** -0.5`` (None there): with a scaled
    RoPE whose ``mscale_all_dim`` is set, that times ``yarn_mscale(factor, mscale_all_dim) ** 2``."""
    kind = params.get("rope_type") or params.get("type") or "default"
    mscale_all_dim = params.get("mscale_all_dim") or 0
    if kind == "default" or not mscale_all_dim:
        return None
    mscale = yarn_mscale(params["factor"], mscale_all_dim)
    return qk_head_dim ** (-0.5) * mscale * mscale


def softmax_scale(config: dict[str, Any]) -> float | None:
    """The attention's ``scale`` of an MLA config (None: the default), from its head dims and rope parameters."""
    return yarn_softmax_scale(config["qk_nope_head_dim"] + config["qk_rope_head_dim"], scaling_parameters(config))


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


def mla_heads(heads: int) -> Computed:
    """Multi-head latent attention as V2's and V3's configs say it: ``num_attention_heads`` (default ``heads``), the
    ranks and widths of ``MLA_KEYS`` and the softmax scale they derive. ``num_key_value_heads`` is null or the heads
    (the latent gives every head its own keys); other counts are refused."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        count, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
        if kv_heads not in (None, count):
            raise HFImportError(
                f"num_key_value_heads={kv_heads} is not supported: multi-head latent attention needs it to be "
                f"{count} (num_attention_heads) or null, as its latent expands to every head (transformers too)"
            )
        out = {"attention.type": "mla", "attention.num_heads": count, **{f"attention.{k}": config[k] for k in MLA_KEYS}}
        return {**out, "attention.scale": softmax_scale(config)}

    return Computed(
        "heads",
        keys={"num_attention_heads": heads, "num_key_value_heads": None, **MLA_KEYS},
        paths=("attention.type", "attention.num_heads", "attention.scale", *(f"attention.{k}" for k in MLA_KEYS)),
        read=read,
        write=lambda recipe, weights: heads_keys(recipe.attention, latents=True),
        requires={"attention.type": "mla", "attention.scale": scale_fits},
    )


def greedy_router(config: dict[str, Any]) -> dict[str, Any]:
    if config["topk_method"] == "greedy":
        return {}
    if config["n_group"] is None or config["topk_group"] is None:
        raise HFImportError("topk_method group_limited_greedy needs n_group and topk_group")
    return {"ffn.n_group": config["n_group"], "ffn.topk_group": config["topk_group"], "ffn.group_scoring": "max"}


def groups_fit(recipe: Any) -> str | None:
    scoring = recipe.ffn.group_scoring
    if recipe.ffn.n_group > 1 and scoring != "max":
        return f"ffn.group_scoring is {scoring!r}, needs 'max' (V2's groups score by their best expert)"
    return None


METHODS = ("greedy", "group_limited_greedy")

GREEDY_ROUTER = (
    Computed(
        "router",
        keys={"topk_method": "greedy", "n_group": None, "topk_group": None},
        paths=("ffn.n_group", "ffn.topk_group", "ffn.group_scoring"),
        read=lambda config, recipe: greedy_router(config),
        write=lambda recipe, weights: (
            {"topk_method": METHODS[recipe.ffn.n_group > 1]}
            | {"n_group": recipe.ffn.n_group, "topk_group": recipe.ffn.topk_group}
        ),
        requires={"ffn.group_scoring": groups_fit},
    ),
    Refused("topk_method", lambda v: v in METHODS, "DeepseekV2's router chooses greedily or group_limited_greedy"),
    Refused(
        "norm_topk_prob",
        lambda v: not v,
        "transformers' DeepseekV2TopkRouter never renormalises the top-k weights whatever it says (DeepSeek's "
        "own code does): the checkpoint's intent and transformers' network differ",
        export=False,
    ),
    Refused("scoring_func", lambda v: v in (None, "softmax"), "DeepseekV2's router scores with a softmax"),
)
"""DeepSeek-V2's ``topk_method``: the top-k of all experts (``greedy``) or within the best ``topk_group`` of
``n_group`` groups by their best score (``group_limited_greedy``: zoo's ``group_scoring: max``); transformers'
router never renormalises their weights."""

NOAUX_ROUTER = (
    Key("norm_topk_prob", "ffn.normalize", True, read=bool),
    Fixed("ffn.scoring", "sigmoid"),
    Fixed("ffn.correction_bias", True),
    Key("n_group", "ffn.n_group", 8),
    Key("topk_group", "ffn.topk_group", 4),
    Refused("scoring_func", lambda v: v in (None, "sigmoid"), "DeepseekV3's router scores with a sigmoid"),
    Refused("topk_method", lambda v: v in (None, "noaux_tc"), "DeepseekV3's router chooses by noaux_tc"),
    *(
        at_least(k, f"{k} must be a positive integer (transformers cannot build the model otherwise)", bools=False)
        for k in ("n_group", "topk_group")
    ),
)
"""DeepSeek-V3's router: sigmoid scores plus a correction bias that chooses (does not weight) the top-k among the best
``topk_group`` of ``n_group`` groups (``noaux_tc``: groups scored by their two best), renormalised."""


POSITIVE = ("num_experts_per_tok", "n_routed_experts", "n_shared_experts", "v_head_dim")
DEEPSEEK_ROWS = (
    Refused("moe_layer_freq", lambda v: v in (None, 1), "every layer from first_k_dense_replace on is an MoE layer"),
    *(
        at_least(k, f"{k} must be a positive integer (transformers cannot build the model otherwise)", bools=False)
        for k in POSITIVE
    ),
    at_least(
        "first_k_dense_replace",
        "first_k_dense_replace must be an integer >= 0 (the dense layers first)",
        0,
        bools=False,
    ),
    Refused(
        "quantization_config",
        lambda v: v is None,
        "the weights are quantised (DeepSeek-V3's FP8 blocks with weight_scale_inv scales) and zoo reads plain "
        "tensors only; dequantise them to bf16 first (DeepSeek's inference/fp8_cast_bf16.py)",
    ),
    Unread("head_dim", "the config class sets it to qk_rope_head_dim (the dims RoPE rotates), which zoo reads"),
    Unread("qk_head_dim", "the config class sets it to qk_nope_head_dim + qk_rope_head_dim, which zoo reads"),
    Unread("pretraining_tp", "how DeepSeek sliced the projections across devices to pretrain: the same matmuls"),
)
"""What DeepSeek-V2's and V3's configs both say that zoo refuses or need not read."""
