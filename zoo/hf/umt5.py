"""UMT5 (``UMT5ForConditionalGeneration``): mT5's layout with a relative position bias table in every layer.

T5 computes its bucketed bias in the first block of each stack and reuses it; UMT5 gives every self-attention
its own ``relative_attention_bias`` (cross-attention has none). In zoo the stack has no positional encoding
(``positional: none``) and each attention holds its own table (``attention.position_bias: {type:
t5_relative}``). The head rescales the decoder output as T5 does (``scale_decoder_outputs``: false in the
published checkpoints, which hold their own ``lm_head.weight``). The rest of the table is T5's.
"""

from __future__ import annotations

from .mapping import Rule
from .mt5 import SIZES, tied
from .rows_classic import named
from .t5 import RULES, T5, fits_head, hf_head, rescales
from .table import Computed, Fixed, Key

SHARED_BIAS = "positional.relative_attention_bias.weight"
"""T5's rows of the one table per stack, which UMT5 replaces with a table per layer."""


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
        Computed(
            "tie",  # tied exactly when the checkpoint has no lm_head.weight (mT5's rule); rescaled as T5 says
            keys={"tie_word_embeddings": True, "scale_decoder_outputs": None},
            paths=("head.tie_embeddings", "head.rescale"),
            read=lambda config, recipe, hf_class, names: {
                "head.tie_embeddings": tied(config, names),
                "head.rescale": rescales(config),
            },
            write=hf_head,
            requires={"head": fits_head},
            checkpoint=True,
        ),
    ),
    defaults={**SIZES, "decoder_start_token_id": 0},
)
