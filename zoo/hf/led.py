"""LED (``LEDForConditionalGeneration``, the Longformer Encoder-Decoder): BART whose encoder attends as Longformer,
with learned positions read from row 0 (no offset) and a position table of its own size in each stack.

Each encoder layer slides a window of ``attention_window`` (one-sided ``window / 2``) with global tokens whose
projections are their own (zoo's ``attention: {type: longformer}`` on the encoder, ``rows_longformer``); the first
token is global (``global_tokens: 1``, transformers' ``global_attention_mask`` on ``<s>``). The decoder is BART's.
"""

from .bart import BART, FAIRSEQ_LAYER, LOGITS_BIAS, fairseq_layers, named_rows
from .mapping import Rule
from .rows_longformer import decoder_table, encoder_attention, longformer_rules
from .table import Fixed, Key

STACK_ROWS = ("embed_positions.weight positional.embedding.weight", "layernorm_embedding.weight embed_norm.weight")
ENCODER_ROWS = tuple(pair for pair in FAIRSEQ_LAYER if not pair[0].startswith("self_attn."))

LED = BART.derive(
    "led",
    classes=("LEDForConditionalGeneration", "LEDModel"),
    rules=(
        Rule("led.shared.weight", "embedding.token.weight"),
        *(
            Rule(f"led.{s}.{hf}", f"{s}.{zoo}")
            for s in ("encoder", "decoder")
            for hf, zoo in map(str.split, STACK_ROWS)
        ),
        Rule("led.encoder.layernorm_embedding.bias", "encoder.embed_norm.bias"),
        Rule("led.decoder.layernorm_embedding.bias", "decoder.embed_norm.bias"),
        *(r for r in fairseq_layers("led") if r.hf.startswith("led.decoder.")),
        *(
            Rule(f"led.encoder.layers.{{i}}.{hf}.{k}", f"encoder.blocks.{{i}}.{zoo}.{k}")
            for hf, zoo in ENCODER_ROWS
            for k in ("weight", "bias")
        ),
        *longformer_rules("led"),
        LOGITS_BIAS,
    ),
    ignored=("led.encoder.embed_tokens.weight", "led.decoder.embed_tokens.weight", "lm_head.weight"),
    base_prefix="led.",
    recipes=("led-base-16384",),
    drop=("max_position_embeddings", "layers"),
    rows=(
        Key("max_encoder_position_embeddings", "max_len", 16384),
        decoder_table("max_decoder_position_embeddings", 1024),
        Fixed("positional.offset", 0),
        encoder_attention(),
        *named_rows("LED"),
    ),
)
