"""PhiMoE (``PhimoeForCausalLM``, Phi-3.5-MoE): Mixtral's network with biased LayerNorms (of ``rms_norm_eps``), one
``attention_bias``, an optional ``lm_head_bias`` and the sparsemixer router (zoo's ``scoring: sparsemixer``: two experts
picked in turn, each weighted among those within a relative ``2 * router_jitter_noise`` of it; the eval mode)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from zoo.errors import HFImportError

from ._moe import BLOCK, LAYER, ROUTER_LOGITS
from .mapping import Option, Rule
from .mixtral import MIXTRAL
from .rope import hf_rope_parameters, rope_options, rope_spec, rope_type, scaling_parameters
from .rows import ONE_BIAS, ROPE
from .table import Computed, Fixed, Key, Unread

NORMS = (("input", "attention"), ("post_attention", "ffn"))
RULES = (
    *MIXTRAL.rules,
    *(Rule(f"{LAYER}.{hf}_layernorm.bias", f"{BLOCK}.{zoo}_norm.bias") for hf, zoo in NORMS),
    Rule("model.norm.bias", "final_norm.bias"),
    Rule("lm_head.bias", "head.proj.bias"),
)
TYPE_WHY = (
    "PhimoeRotaryEmbedding scales cos and sin by short_mscale whatever the type: zoo computes default and longrope"
)


# PhimoeRotaryEmbedding: LongRoPE's short factors at every length, cos and sin scaled by short_mscale (long_mscale
# past original_max_position_embeddings): zoo's longrope with long factors = short ones, attention_factor = mscale.
def read_rope(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    params = scaling_parameters(config)
    if rope_type(params) == "default":
        return {"positional": rope_spec(config)}
    short, long = params.get("short_mscale"), params.get("long_mscale")
    if short != long:
        raise HFImportError(
            f"short_mscale={short!r} and long_mscale={long!r}: PhiMoE's attention factor would change "
            "with the sequence length, which zoo's rope does not compute"
        )
    spec = rope_spec(config)
    return {"positional": {**spec, "long_factor": spec["short_factor"], "attention_factor": float(short)}}


def write_rope(recipe: Any, weights: Any) -> dict[str, Any]:
    params = hf_rope_parameters(recipe.positional)
    if recipe.positional.scaling == "longrope":
        factor = params.pop("attention_factor")
        params.update(short_mscale=factor, long_mscale=factor)
    return {"rope_parameters": params, "rope_theta": recipe.positional.theta}


def rope_fits(recipe: Any) -> str | None:
    rope = recipe.positional
    if rope.scaling == "none" or (
        rope.scaling == "longrope" and rope.long_factor == rope.short_factor and rope.attention_factor is not None
    ):
        return None
    return "PhiMoE's rope is unscaled, or LongRoPE with long factors equal to its short ones and an attention_factor"


def read_head_bias(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    if config["lm_head_bias"] and config["tie_word_embeddings"]:
        raise HFImportError(
            "lm_head_bias=True with tie_word_embeddings=True is not supported: PhiMoE's tied head keeps a bias of "
            "its own, and zoo's tied head has none (tie_embeddings excludes bias)"
        )
    return {"head.bias": bool(config["lm_head_bias"])}


PHIMOE = MIXTRAL.derive(
    "phimoe",
    classes=("PhimoeForCausalLM", "PhiMoEForCausalLM"),  # transformers' and the remote code's
    rules=RULES,
    recipes=("phi-3.5-moe",),
    drop=("attention.bias", "router_jitter_noise"),
    rows=(
        ONE_BIAS,
        replace(ROPE, read=read_rope, write=write_rope, requires={**ROPE.requires, "positional.scaling": rope_fits}),
        *rope_options(("default", "longrope"), TYPE_WHY),
        Fixed("norm.type", "layernorm"),
        Computed(
            "head bias",
            keys={"lm_head_bias": False},
            paths=("head.bias",),
            read=read_head_bias,
            write=lambda recipe, weights: {"lm_head_bias": recipe.head.bias},
        ),
        Fixed("ffn.scoring", "sparsemixer"),
        Fixed("ffn.normalize", False),
        Key("router_jitter_noise", "ffn.sparsemixer_eps", 0.01),
        Option("num_experts_per_tok", lambda v: v == 2, "PhiMoE's sparsemixer picks two experts whatever it says"),
        Unread("input_jitter_noise", "noise on the router's input in training only (zoo computes the eval mode)"),
        ROUTER_LOGITS,
    ),
    defaults={"vocab_size": 32064, "hidden_size": 4096, "intermediate_size": 6400, "num_local_experts": 16}
    | {"max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "sliding_window": None},
)
