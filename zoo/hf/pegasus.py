"""Pegasus (``PegasusForConditionalGeneration``): Marian normalised before each sub-layer with a final LayerNorm on
each stack (M2M-100's layout), its sinusoid tables saved in the checkpoint (``parameter: true``; else computed)."""

from .bart import IGNORED, LOGITS_BIAS, SHARED, STACKS, fairseq_layers, named_rows, norms
from .mapping import Rule
from .marian import MARIAN
from .rows_flags import holds
from .rows_neox import linear_rules
from .table import Fixed, Key

PEGASUS = MARIAN.derive(
    "pegasus",
    classes=("PegasusForConditionalGeneration",),
    rules=(
        SHARED,
        *fairseq_layers(),
        *(rule for stack in STACKS for rule in linear_rules(f"model.{stack}.", f"{stack}.", "layer_norm final_norm")),
        *(Rule(f"model.{stack}.embed_positions.weight", f"{stack}.positional.table") for stack in STACKS),
        LOGITS_BIAS,
    ),
    ignored=IGNORED,
    recipes=("pegasus-large",),
    drop=("vocab_size", "embed_norm", "final_norm", "positional.parameter", "share_encoder_decoder_embeddings"),
    rows=(
        Key("vocab_size", "vocab_size", 50265),
        Fixed("block.norm_position", "pre"),
        norms(pre_norm=True),
        # transformers computes the tables a checkpoint lacks, and so does zoo (a buffer)
        holds("stored tables", "positional.parameter", "model.encoder.embed_positions.weight"),
        *named_rows("Pegasus"),
    ),
    defaults={"pad_token_id": 0, "decoder_start_token_id": 0},
)
