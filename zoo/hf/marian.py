"""Marian (``MarianMTModel``): BART's post-norm encoder-decoder without stack norms, embeddings scaled, sinusoidal
positions (``layout: marian``), frozen parameters that transformers leaves out of its checkpoints: computed."""

from zoo.components.positional.sinusoidal import marian_sinusoid_table

from .bart import BART, IGNORED, LOGITS_BIAS, SHARED, STACKS, computed_tables, fairseq_layers, named_rows, shared_key
from .table import Fixed, Refused

TABLES = computed_tables(lambda recipe: marian_sinusoid_table(recipe.max_len, recipe.d_model))
TWO_TABLES = "zoo's encoder-decoder has one token table for both stacks and the head; this Marian has two"

MARIAN = BART.derive(
    "marian",
    classes=("MarianMTModel",),
    rules=(SHARED, *fairseq_layers(), LOGITS_BIAS, *TABLES),
    ignored=(*IGNORED, *(f"model.{stack}.embed_positions.weight" for stack in STACKS)),  # older files' copies
    recipes=("opus-mt-en-de",),
    drop=("vocab_size", "positional.offset", "stack norms", "classifier_dropout"),
    rows=(
        Fixed("embed_norm", False),
        Fixed("final_norm", False, also=(None,)),
        Fixed("positional.type", "sinusoidal"),
        Fixed("positional.layout", "marian"),
        Fixed("positional.parameter", True, also=(False,)),  # a table is never exported: either builds the same
        *named_rows("Marian"),
        Refused("share_encoder_decoder_embeddings", lambda v: v is not False, TWO_TABLES, export=True),
        shared_key("vocab_size", "decoder_vocab_size", 58101, "zoo's decoder"),
    ),
    defaults={"pad_token_id": 58100, "decoder_start_token_id": 58100},
)
