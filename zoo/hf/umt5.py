"""UMT5 (``UMT5ForConditionalGeneration``): mT5's layout with a relative position bias table in every layer.

T5 computes its bucketed bias in the first block of each stack and reuses it; UMT5 gives every self-attention
its own ``relative_attention_bias`` (cross-attention has none). In zoo the stack has no positional encoding
(``positional: none``) and each attention holds its own table (``attention.position_bias: {type:
t5_relative}``). The head rescales the decoder output as T5 does (``scale_decoder_outputs``: false in the
published checkpoints, which hold their own ``lm_head.weight``). The rest of the table is T5's.
"""

from __future__ import annotations

from typing import Any

from . import mt5, t5
from .mapping import Family, Rule

SHARED_BIAS = "positional.relative_attention_bias.weight"
"""T5's rows of the one table per stack, which UMT5 replaces with a table per layer."""

RULES = (
    *(rule for rule in t5.RULES if not rule.zoo_names[0].endswith(SHARED_BIAS)),
    *(
        Rule(
            f"{stack}.block.{{i}}.layer.0.SelfAttention.relative_attention_bias.weight",
            f"{stack}.blocks.{{i}}.attention.position_bias.relative_attention_bias.weight",
        )
        for stack in ("encoder", "decoder")
    ),
)


def buckets(recipe: Any) -> Any:
    """The validated ``t5_relative`` config of the recipe's per-layer bias, or None when it has none."""
    return getattr(recipe.attention, "position_bias", None)


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    # Transformers 5 writes tie_word_embeddings: true into every UMT5 config; the head is tied exactly when the
    # checkpoint has no lm_head.weight of its own (mT5's rule). Rescaling follows scale_decoder_outputs.
    rescale = config["scale_decoder_outputs"]
    rescale = bool(config["tie_word_embeddings"]) if rescale is None else bool(rescale)
    out = t5.t5_recipe(config, tie=mt5.tied(config, names), rescale=rescale)
    out["attention"]["position_bias"] = out.pop("positional")
    out["positional"] = {"type": "none"}
    return {"hf_family": "umt5", **out}


def config(recipe, weights) -> dict[str, Any]:
    table = buckets(recipe)
    return t5.config(recipe.model_copy(update={"positional": table}), weights)


def _bias_in_every_layer(recipe) -> str | None:
    table = buckets(recipe)
    if table is None or table.type != "t5_relative":
        shown = "absent" if table is None else repr(table.type)
        return f"attention.position_bias is {shown}, needs {{type: t5_relative}} (UMT5 has a bias table per layer)"
    return None


REQUIREMENTS = {
    **{k: v for k, v in t5.REQUIREMENTS.items() if k != "attention.position_bias"},
    "positional.type": "none",
    "attention.position_bias": _bias_in_every_layer,
}

DEFAULTS: dict[str, Any] = {
    **t5.DEFAULTS,
    "vocab_size": 250112,
    "d_ff": 1024,
    "num_layers": 8,
    "num_heads": 6,
    "feed_forward_proj": "gated-gelu",
    "decoder_start_token_id": 0,
}

UMT5 = Family(
    name="umt5",
    model_type="umt5",
    classes=("UMT5ForConditionalGeneration",),
    base_prefix="",
    head_prefixes=(),
    defaults=DEFAULTS,
    options=t5.OPTIONS,
    rules=RULES,
    ignored=t5.IGNORED,
    requirements=REQUIREMENTS,
    recipes=("umt5-small",),
    unread=dict(t5.T5.unread),
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "UMT5ForConditionalGeneration",
)
