"""Cohere2 (``Cohere2ForCausalLM``, Command R7B): Cohere's network in which ``sliding_attention`` layers slide over
``sliding_window`` keys with RoPE and ``full_attention`` layers see every key without positions (NoPE)."""

from __future__ import annotations

from typing import Any

from .cohere import COHERE
from .layer_kinds import FULL, SLIDING, every_nth, layer_kinds, nope, slides, sliding_types, windowed
from .rows import layer_attentions, uses_rope
from .table import Unread


def rotates_where_it_slides(recipe: Any) -> str | None:
    """A requirement: the layers that slide share one window and rotate; the others are NoPE."""
    attentions = layer_attentions(recipe)
    if len({a.window for a in attentions} - {None}) > 1:
        return "the layers' windows differ; a sliding_window is one value"
    wrong = [i for i, a in enumerate(attentions) if (a.window is not None) != uses_rope(a)]
    return f"layers {wrong}: Cohere2 rotates exactly the layers that slide" if wrong else None


COHERE2 = COHERE.derive(
    "cohere2",
    classes=("Cohere2ForCausalLM",),
    recipes=("command-r7b",),
    drop=("use_qk_norm", "layers"),
    rows=(
        Unread("head_dim", "Cohere2Config sets it to hidden_size / num_attention_heads whatever config.json says"),
        layer_kinds(  # as Cohere2Attention: a layer rotates only when it slides (with no window, none does)
            layer_types=sliding_types({SLIDING: windowed(slides, nope), FULL: nope}, fill=every_nth(FULL, SLIDING)),
            keys={"sliding_window": 4096, "layer_types": None, "sliding_window_pattern": 4},
            requires={"attention.rotary": rotates_where_it_slides},
            legacy=("sliding_window_pattern",),  # older configs' pattern; layer_types, written, says it per layer
        ),
    ),
    defaults={"rope_theta": 10000.0},
)
