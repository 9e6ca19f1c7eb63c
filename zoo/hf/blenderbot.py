"""Blenderbot (``BlenderbotForConditionalGeneration``): mBART's encoder-decoder without the LayerNorm on the
embeddings (a final LayerNorm closes each stack) and with learned positions read from row 0 (no offset); in the
published checkpoints a 2-layer encoder under a deeper decoder, embeddings scaled."""

from .bart import named_rows
from .mbart import MBART
from .table import Fixed, Unread

BLENDERBOT = MBART.derive(
    "blenderbot",
    classes=("BlenderbotForConditionalGeneration",),
    recipes=("blenderbot-400m-distill",),
    drop=("positional.offset", "classifier_dropout"),
    rows=(
        Fixed("embed_norm", False),
        *named_rows("Blenderbot"),
        Unread("encoder_no_repeat_ngram_size", "a generation setting (generation_config.json), not the network"),
    ),
    defaults={"vocab_size": 8008, "max_position_embeddings": 128, "encoder_layers": 2, "decoder_layers": 24}
    | {"d_model": 2560, "encoder_ffn_dim": 10240, "decoder_ffn_dim": 10240, "encoder_attention_heads": 32}
    | {"decoder_attention_heads": 32, "pad_token_id": 0, "decoder_start_token_id": 1},
)
