"""Sliding-window (local) attention as in Mistral 7B, with a rolling KV cache bounded by the window.

Each query sees the ``window`` most recent keys, itself included: in a causal stack the query at sequence
index ``i`` sees keys ``i - window + 1 .. i``. A stack of ``n`` layers still carries information about
``n * window`` tokens back, while attention cost and decoding memory stay bounded by the window::

    window = 3, causal         keys ->  0 1 2 3 4 5
                              query 0   x
                              query 1   x x
                              query 2   x x x
                              query 3     x x x
                              query 4       x x x
                              query 5         x x x

In a bidirectional stack (an encoder) a query sees keys less than ``window`` away on either side. Everything
is zoo's ``gqa`` (``GroupedQueryAttention``) with its ``window`` option: the window (``sliding_window_mask``,
through the attention's ``key_mask`` seam) and the decoding cache that holds the window, not the sequence
(``RollingKVCache``), are zoo's own; this package keeps the ``sliding_window`` type, whose ``window`` is
required.

Shapes: N batch, L query length, S key length, E d_model, H query heads, Hkv key/value heads, D head_dim,
W window.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from zoo.cache import RollingKVCache
from zoo.components.attention import AttentionConfig, GroupedQueryAttention, sliding_window_mask

__all__ = ["RollingKVCache", "SlidingWindowAttention", "SlidingWindowConfig", "sliding_window_mask"]


class SlidingWindowAttention(GroupedQueryAttention):
    """Grouped-query attention over the ``window`` most recent keys (Mistral), with a rolling KV cache.

    zoo's ``GroupedQueryAttention`` with its key mask a ``SlidingWindow``: the same parameters (``q_proj`` ...
    ``o_proj``), so weights move between the two, and with a window covering the whole sequence the outputs are
    equal. Cross-attention (over an encoder output) has no window and is plain grouped-query attention.

    Build it from a recipe's options with ``SlidingWindowAttention.from_options(d_model, window=..., ...)`` (the
    registered factory), or give the constructor ``key_mask=SlidingWindow(window)`` and the other seams of
    ``GroupedQueryAttention``.
    """


class SlidingWindowConfig(AttentionConfig):
    """Recipe options of ``sliding_window``: grouped-query attention over the most recent ``window`` keys."""

    type: Literal["sliding_window"] = "sliding_window"
    window: int = Field(ge=1, description="Keys each query sees, itself included (Mistral 7B: 4096).")
    num_kv_heads: int | None = Field(
        None, ge=1, description="Key/value heads, dividing num_heads; default num_heads (multi-head)."
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {"num_heads": 4, "num_kv_heads": 2, "window": 3},
        {"num_heads": 4, "window": 1, "bias": False},
    )

    @model_validator(mode="before")
    @classmethod
    def _default_kv_heads(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("num_kv_heads") is None and "num_heads" in data:
            data = {**data, "num_kv_heads": data["num_heads"]}
        return data
