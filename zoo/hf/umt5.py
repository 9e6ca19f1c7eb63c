"""UMT5 (``UMT5ForConditionalGeneration``): mT5's layout with a relative position bias table in every
self-attention (T5 computes one in each stack's first block and reuses it): zoo's ``positional: none`` with
``attention.position_bias: {type: t5_relative}``. The head rescales as T5's does (``scale_decoder_outputs``: false in
the published checkpoints, which hold their own ``lm_head.weight``)."""

from __future__ import annotations

from .mapping import Rule
from .mt5 import SIZES
from .rows_classic import named
from .t5 import RULES, T5, own_head
from .table import Fixed, Key

SHARED_BIAS = "positional.relative_attention_bias.weight"  # T5's one table per stack: UMT5 has one per layer

UMT5 = T5.derive(
    "umt5",
    classes=("UMT5ForConditionalGeneration",),
    recipes=("umt5-small",),
    rules=(
        *(rule for rule in RULES if not rule.zoo_names[0].endswith(SHARED_BIAS)),
        *(
            Rule(
                f"{stack}.block.{{i}}.layer.0.SelfAttention.relative_attention_bias.weight",
                f"{stack}.blocks.{{i}}.attention.position_bias.relative_attention_bias.weight",
            )
            for stack in ("encoder", "decoder")
        ),
    ),
    rows=(
        named("umt5"),
        Fixed("positional.type", "none"),
        Fixed("attention.position_bias.type", "t5_relative"),
        Key("relative_attention_num_buckets", "attention.position_bias.num_buckets", 32),
        Key("relative_attention_max_distance", "attention.position_bias.max_distance", 128),
        own_head(rescale=True),  # tied as mT5's; rescaled as scale_decoder_outputs says (false as published)
    ),
    defaults={**SIZES, "decoder_start_token_id": 0},
)
