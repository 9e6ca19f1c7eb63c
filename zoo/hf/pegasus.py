"""Pegasus (``PegasusForConditionalGeneration``): Marian's network normalised before each sub-layer, with a final
LayerNorm on each stack (M2M-100's layout) and its sinusoid tables saved in the checkpoint (frozen parameters,
``parameter: true``, read as the file holds them); a checkpoint without them imports with the tables computed."""

from .bart import IGNORED, STACKS, encoder_decoder, fairseq_layers, norms, shared_table, stacks
from .mapping import UNSQUEEZE, Rule, activation_option
from .marian import MARIAN
from .rows_neox import linear_rules
from .table import Computed, Fixed, Key

TABLE = "model.encoder.embed_positions.weight"

PEGASUS = MARIAN.derive(
    "pegasus",
    classes=("PegasusForConditionalGeneration",),
    rules=(
        Rule("model.shared.weight", "embedding.token.weight"),
        *fairseq_layers(),
        *(rule for stack in STACKS for rule in linear_rules(f"model.{stack}.", f"{stack}.", "layer_norm final_norm")),
        *(Rule(f"model.{stack}.embed_positions.weight", f"{stack}.positional.table") for stack in STACKS),
        Rule("final_logits_bias", "head.logits_bias", UNSQUEEZE),
    ),
    ignored=IGNORED,
    recipes=("pegasus-large",),
    drop=("vocab", "embed_norm", "final_norm", "positional.parameter", "share_encoder_decoder_embeddings"),
    rows=(
        Key("vocab_size", "vocab_size", 50265),
        Fixed("block.norm_position", "pre"),
        norms(pre_norm=True),
        Computed(
            "stored tables",  # transformers computes the tables a checkpoint lacks, and so does zoo (a buffer)
            keys={},
            paths=("positional.parameter",),
            read=lambda config, recipe, hf_class, names: {"positional.parameter": names is None or TABLE in names},
            write=lambda recipe, weights: {},
            checkpoint=True,
        ),
        stacks("Pegasus"),
        activation_option("activation_function", "Pegasus"),
        shared_table("Pegasus"),
        encoder_decoder("Pegasus"),
    ),
    defaults={"pad_token_id": 0, "decoder_start_token_id": 0},
)
