"""mT5 (``MT5ForConditionalGeneration``): T5 v1.1's layout (gated-GELU FFN, RMSNorm, relative position buckets)
whose head never rescales the decoder output (``MT5ForConditionalGeneration.forward`` has no such line): read as T5,
transformers 5's ``tie_word_embeddings: true`` would rescale, every logit ``sqrt(d_model)`` times too small. The head
is tied unless the checkpoint holds its own ``lm_head.weight`` (the published ones do). The weight table is T5's."""

from __future__ import annotations

from .rows_classic import named
from .t5 import T5, own_head
from .table import Unread

SIZES = {"vocab_size": 250112, "d_ff": 1024, "num_layers": 8, "num_heads": 6, "feed_forward_proj": "gated-gelu"}
"""MT5Config's defaults (UMT5Config's too) where they differ from T5Config's."""

MT5 = T5.derive(
    "mt5",
    classes=("MT5ForConditionalGeneration",),
    recipes=("mt5-small",),
    rows=(
        named("mt5"),  # T5's network too (a T5 recipe without rescaling): exported back as mT5
        own_head(rescale=False),
        Unread("bos_token_id", "a generation setting (generation_config.json), not part of the network"),
    ),
    defaults={**SIZES, "decoder_start_token_id": 0},
)
