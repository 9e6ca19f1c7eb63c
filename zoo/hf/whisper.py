"""Whisper (``WhisperForConditionalGeneration``): a pre-norm encoder-decoder whose encoder hears log-mel frames.

The encoder's input is zoo's ``encoder_embedding: {type: audio}``: two convolutions (``conv1``, ``conv2``, the
second of stride 2) and the frozen sinusoidal table ``embed_positions`` of ``max_source_positions`` rows; its stack
then adds no positions. The decoder is Blenderbot's: learned positions from row 0 (``max_target_positions`` rows),
a final LayerNorm per stack, none on the embeddings, and a head tied to the decoder's token table (``proj_out``).
Every attention projection has a bias but the keys' (zoo's ``k_bias: false``). Decoding starts from
``decoder_start_token_id`` (``<|startoftranscript|>``, 50258).
"""

from .bart import named_rows
from .blenderbot import BLENDERBOT
from .rows_audio import FRONT_END, UNREAD, speech_rules
from .table import Fixed, Key, Refused

WHISPER = BLENDERBOT.derive(
    "whisper",
    classes=("WhisperForConditionalGeneration",),
    rules=speech_rules(),
    ignored=("proj_out.weight",),
    head_prefixes=("proj_out.",),
    recipes=("whisper-tiny", "whisper-base"),
    drop=("max_position_embeddings", "logits bias", "scale_embedding", "classifier_dropout", "is_decoder")
    + ("encoder_no_repeat_ngram_size", "forced_eos_token_id"),
    rows=(
        Key("max_target_positions", "max_len", 448),
        FRONT_END,
        Fixed("attention.k_bias", False),
        *named_rows("Whisper"),
        Refused("tie_word_embeddings", lambda v: v is not False, "zoo's Whisper head is the decoder's token table"),
        *UNREAD,
    ),
    defaults={"vocab_size": 51865, "encoder_layers": 4, "decoder_layers": 4, "d_model": 384}
    | {"encoder_ffn_dim": 1536, "decoder_ffn_dim": 1536, "encoder_attention_heads": 6, "decoder_attention_heads": 6}
    | {"pad_token_id": 50256, "decoder_start_token_id": 50257, "dropout": 0.0},
)
