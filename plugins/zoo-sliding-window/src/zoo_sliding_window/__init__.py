"""zoo-sliding-window: Mistral-style sliding-window attention for zoo, with a rolling KV cache.

Installing this package registers the attention type ``sliding_window`` and the recipe ``mistral-tiny``::

    attention: {type: sliding_window, num_heads: 4, num_kv_heads: 2, window: 16}
"""

from __future__ import annotations

from pathlib import Path

import zoo

from .attention import RollingKVCache, SlidingWindowAttention, SlidingWindowConfig, sliding_window_mask

__all__ = ["RollingKVCache", "SlidingWindowAttention", "SlidingWindowConfig", "sliding_window_mask"]
__version__ = "0.1.0"

ZOO_PLUGIN_API = 1
RECIPES = Path(__file__).parent / "recipes"


@zoo.hookimpl
def register_components(register):
    register(
        "attention",
        "sliding_window",
        SlidingWindowAttention.from_options,
        SlidingWindowConfig,
        description="Grouped-query attention over the ``window`` most recent keys (Mistral), with a rolling KV cache.",
    )


@zoo.hookimpl
def register_recipes():
    return [RECIPES]
