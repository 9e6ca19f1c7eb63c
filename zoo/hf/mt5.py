"""mT5 (``MT5ForConditionalGeneration``): T5 v1.1's layout (gated-GELU FFN, RMSNorm, relative position buckets)
whose head never rescales the decoder output.

T5 multiplies the decoder output by ``d_model**-0.5`` before a tied head; mT5 never does, tied or not
(``MT5ForConditionalGeneration.forward`` has no such line). Transformers 5 writes ``tie_word_embeddings: true``
into every mT5 config and ties the head unless the checkpoint holds its own ``lm_head.weight`` (the published
checkpoints do): read as T5, such a config would rescale, and every logit would be ``sqrt(d_model)`` times too
small. The weight table is T5's.
"""

from __future__ import annotations

from typing import Any

from .rows_classic import named
from .t5 import T5, fits_head
from .table import Computed, Unread

SIZES = {"vocab_size": 250112, "d_ff": 1024, "num_layers": 8, "num_heads": 6, "feed_forward_proj": "gated-gelu"}
"""MT5Config's defaults (UMT5Config's too) where they differ from T5Config's."""


def tied(config: dict[str, Any], names: frozenset[str] | None) -> bool:
    """Whether the head is the token table: the checkpoint has no ``lm_head.weight`` of its own (transformers 5
    ties every other mT5), or, with no checkpoint to look at, the config's ``tie_word_embeddings``."""
    if names is not None:
        return "lm_head.weight" not in names
    return bool(config["tie_word_embeddings"])


def never_rescales(recipe: Any) -> str | None:
    if recipe.head.type == "lm" and recipe.head.rescale:
        return "head.rescale is True, needs False (mT5 never rescales the decoder output)"
    return None


MT5 = T5.derive(
    "mt5",
    classes=("MT5ForConditionalGeneration",),
    recipes=("mt5-small",),
    rows=(
        named("mt5"),  # T5's network too (a T5 recipe without rescaling): exported back as mT5
        Computed(
            "tie",  # mT5 has no scale_decoder_outputs: it never rescales
            keys={"tie_word_embeddings": True},
            paths=("head.tie_embeddings", "head.rescale"),
            read=lambda config, recipe, hf_class, names: {
                "head.tie_embeddings": tied(config, names),
                "head.rescale": False,
            },
            write=lambda recipe, weights: {"tie_word_embeddings": recipe.head.tie_embeddings},
            requires={"head": fits_head, "head.rescale": never_rescales},
            checkpoint=True,
        ),
        Unread("bos_token_id", "a generation setting (generation_config.json), not part of the network"),
    ),
    defaults={**SIZES, "decoder_start_token_id": 0},
)
