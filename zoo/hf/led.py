"""LED (``LEDForConditionalGeneration``, the Longformer Encoder-Decoder): BART whose encoder attends as Longformer,
with learned positions read from row 0 (no offset) and a position table of its own size in each stack.

Each encoder layer slides a window of ``attention_window`` (one-sided ``window / 2``) with global tokens whose
projections are their own (zoo's ``attention: {type: longformer}`` on the encoder, ``rows_longformer``); the first
token is global (``global_tokens: 1``, transformers' ``global_attention_mask`` on ``<s>``). The decoder is BART's.
"""

from .bart import BART, named_rows
from .rows_longformer import decoder_table, encoder_attention, longformer_rules
from .table import Fixed, Key

LED = BART.derive(
    "led",
    classes=("LEDForConditionalGeneration", "LEDModel"),
    rules=longformer_rules("led"),
    ignored=("led.encoder.embed_tokens.weight", "led.decoder.embed_tokens.weight", "lm_head.weight"),
    base_prefix="led.",
    recipes=("led-base-16384",),
    drop=("max_position_embeddings", "layers", "scale_embedding", "forced_eos_token_id"),
    rows=(
        Key("max_encoder_position_embeddings", "max_len", 16384),
        decoder_table("max_decoder_position_embeddings", 1024),
        Fixed("positional.offset", 0),
        Fixed("embedding.scale", False),
        encoder_attention(),
        *named_rows("LED"),
    ),
)
