"""LongT5 (``LongT5ForConditionalGeneration``): T5 v1.1 whose encoder attends locally (``encoder_attention_type:
local``, zoo's ``local`` attention) or locally and to global tokens (``transient-global``, zoo's ``transient_global``
attention, the global tokens' bias table in the stack's ``t5_global_relative``); in the decoder the same attention
config is T5's plain attention. The head is tied and rescaled as UMT5's (``scale_decoder_outputs`` follows
``tie_word_embeddings``; the published checkpoints hold their own ``lm_head.weight``)."""

from __future__ import annotations

from .rows_classic import named
from .rows_local_attention import ENCODER_ATTENTION, HF_KINDS, encoder_rules
from .t5 import RULES, T5, own_head
from .table import Refused

T5_ENCODER = ("encoder.block.{i}.layer.0.SelfAttention", "encoder.block.0.layer.0.SelfAttention")
"""T5's encoder self-attention weights, which LongT5 holds in its kind of attention."""

LONGT5 = T5.derive(
    "longt5",
    classes=("LongT5ForConditionalGeneration",),
    recipes=("longt5-tglobal-base",),
    rules=(
        *(rule for rule in RULES if not rule.hf_names[0].startswith(T5_ENCODER)),
        *(rule for hf_kind in HF_KINDS.values() for rule in encoder_rules(hf_kind)),
    ),
    drop=("attention.type", "positional.type", "classifier_dropout"),
    rows=(
        named("longt5"),
        *ENCODER_ATTENTION,
        own_head(rescale=True),
        Refused("is_decoder", lambda v: not v, "LongT5ForConditionalGeneration is an encoder-decoder"),
    ),
)
