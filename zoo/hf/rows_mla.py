"""What DeepSeek-V2 and DeepSeek-V3 share: multi-head latent attention (``mla``) as their configs say it, its weight
names with the rest of their weight table, and the softmax scale ``DeepseekV3Attention`` (and V2's) derives from the
head dims and YaRN's ``mscale_all_dim``. Their experts' rows are in ``zoo/hf/_moe.py`` (``FIRST_K``, ``fits_moe``).
"""

from __future__ import annotations

from typing import Any

from zoo.components.positional import yarn_mscale
from zoo.errors import HFImportError

from ._moe import DENSE_FFN_RULES, FFN, MLP, swiglu_rules
from .llama import COMMON
from .mapping import Rule
from .rope import hf_rope_parameters, scaling_parameters
from .table import Computed

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


def mla_heads(heads: int, why: str) -> Computed:
    """Multi-head latent attention as V2's and V3's configs say it: ``num_attention_heads`` (default ``heads``), the
    ranks and widths of ``MLA_KEYS`` and the softmax scale they derive. ``num_key_value_heads`` is null or the heads
    (the latent gives every head its own keys); other counts are refused by ``why``, ``{kv_heads}`` and ``{heads}``
    filled in."""

    def read(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
        count, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
        if kv_heads not in (None, count):
            raise HFImportError(why.format(kv_heads=kv_heads, heads=count))
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
