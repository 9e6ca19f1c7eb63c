"""Marian (``MarianMTModel``): BART's post-norm encoder-decoder with no stack norm at all, embeddings scaled, and
sinusoidal positions from 0, all sines then all cosines at Vaswani's speeds (``layout: marian``), which
transformers holds as frozen parameters (``parameter: true``) and leaves out of its checkpoints: computed on import."""

from typing import Any

from zoo.components.positional.sinusoidal import marian_sinusoid_table
from zoo.errors import HFImportError

from .bart import BART, IGNORED, STACKS, encoder_decoder, fairseq_layers, shared_table, stacks
from .mapping import UNSQUEEZE, Rule, Transform, activation_option
from .table import Computed, Fixed, Refused


def computed(recipe: Any) -> Transform:
    """No tensor of the checkpoint (transformers saves none): the table, computed."""
    return Transform("computed", lambda t: [marian_sinusoid_table(recipe.max_len, recipe.d_model)], lambda t: [])


def _vocab(config: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """``vocab_size``; a decoder vocabulary of its own (``decoder_vocab_size``) refused: zoo's stacks share one."""
    vocab, decoder = config["vocab_size"], config["decoder_vocab_size"]
    if decoder not in (None, vocab):
        raise HFImportError(f"decoder_vocab_size={decoder!r} is not supported: zoo's decoder reads vocab_size={vocab}")
    return {"vocab_size": vocab}


MARIAN = BART.derive(
    "marian",
    classes=("MarianMTModel",),
    rules=(
        Rule("model.shared.weight", "embedding.token.weight"),
        *fairseq_layers(),
        Rule("final_logits_bias", "head.logits_bias", UNSQUEEZE),
        *(Rule((), f"{stack}.positional.table", computed) for stack in STACKS),
    ),
    ignored=(*IGNORED, *(f"model.{stack}.embed_positions.weight" for stack in STACKS)),  # older files' copies
    recipes=("opus-mt-en-de",),
    drop=("vocab_size", "positional.offset", "stack norms", "classifier_dropout"),
    rows=(
        Fixed("embed_norm", False),
        Fixed("final_norm", False, also=(None,)),
        Fixed("positional.type", "sinusoidal"),
        Fixed("positional.layout", "marian"),
        Fixed("positional.parameter", True, also=(False,)),  # a table is never exported: either builds the same
        stacks("Marian"),
        activation_option("activation_function", "Marian"),
        shared_table("Marian"),
        encoder_decoder("Marian"),
        Refused(
            "share_encoder_decoder_embeddings",
            lambda v: v is not False,
            "zoo's encoder-decoder has one token table for both stacks and the head; this Marian has two",
            export=True,
        ),
        Computed(
            "vocab",
            keys={"vocab_size": 58101, "decoder_vocab_size": None},
            paths=("vocab_size",),
            read=_vocab,
            write=lambda recipe, weights: dict.fromkeys(("vocab_size", "decoder_vocab_size"), recipe.vocab_size),
        ),
    ),
    defaults={"pad_token_id": 58100, "decoder_start_token_id": 58100},
)
