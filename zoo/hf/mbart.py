"""mBART (``MBartForConditionalGeneration``): BART normalised before each sub-layer, with both stack norms: a
LayerNorm on the embeddings (``layernorm_embedding``) and one closing each stack (``layer_norm``); learned positions
read two rows on, embeddings scaled in the published checkpoints, a tied head with ``final_logits_bias``."""

from .bart import BART, RULES, named_rows
from .rows_neox import linear_rules
from .table import Fixed

MBART = BART.derive(
    "mbart",
    classes=("MBartForConditionalGeneration",),
    rules=(
        *RULES,
        *linear_rules("model.encoder.", "encoder.", "layer_norm final_norm"),
        *linear_rules("model.decoder.", "decoder.", "layer_norm final_norm"),
    ),
    recipes=("mbart-large-50",),
    drop=("stack norms",),
    rows=(
        Fixed("block.norm_position", "pre"),
        Fixed("embed_norm", True),
        Fixed("final_norm", True, also=(None,)),
        *named_rows("mBART", "MBart"),
    ),
    defaults={"decoder_start_token_id": None},
)
