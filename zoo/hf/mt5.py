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

from . import t5
from .mapping import Family


def tied(config: dict[str, Any], names: frozenset[str] | None) -> bool:
    """Whether the head is the token table: the checkpoint has no ``lm_head.weight`` of its own (transformers 5
    ties every other mT5), or, with no checkpoint to look at, the config's ``tie_word_embeddings``."""
    if names is not None:
        return "lm_head.weight" not in names
    return bool(config["tie_word_embeddings"])


def recipe(config: dict[str, Any], hf_class: str, names: frozenset[str] | None) -> dict[str, Any]:
    # T5's network too (a T5 recipe without rescaling): exported back as mT5.
    return {"hf_family": "mt5", **t5.t5_recipe(config, tie=tied(config, names), rescale=False)}


def config(recipe, weights) -> dict[str, Any]:
    out = t5.config(recipe, weights)
    del out["scale_decoder_outputs"]  # mT5 has no such option: it never rescales
    return out


def _never_rescales(recipe) -> str | None:
    if recipe.head.type == "lm" and recipe.head.rescale:
        return "head.rescale is True, needs False (mT5 never rescales the decoder output)"
    return None


DEFAULTS: dict[str, Any] = {
    **t5.DEFAULTS,
    "vocab_size": 250112,
    "d_ff": 1024,
    "num_layers": 8,
    "num_heads": 6,
    "feed_forward_proj": "gated-gelu",
    "decoder_start_token_id": 0,
}
DEFAULTS.pop("scale_decoder_outputs")

UNREAD = {
    **t5.T5.unread,
    "bos_token_id": "a generation setting (generation_config.json), not part of the network",
}

MT5 = Family(
    name="mt5",
    model_type="mt5",
    classes=("MT5ForConditionalGeneration",),
    base_prefix="",
    head_prefixes=(),
    defaults=DEFAULTS,
    options=t5.OPTIONS,
    rules=t5.RULES,
    ignored=t5.IGNORED,
    requirements={**t5.REQUIREMENTS, "head.rescale": _never_rescales},
    recipes=("mt5-small",),
    unread=UNREAD,
    recipe=recipe,
    config=config,
    hf_class=lambda recipe: "MT5ForConditionalGeneration",
)
