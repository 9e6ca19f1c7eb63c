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
else is zoo's ``gqa`` (``GroupedQueryAttention``): this package adds only the window, through the attention's
``key_mask`` seam, and a decoding cache that holds the window, not the sequence.

Shapes: N batch, L query length, S key length, E d_model, H query heads, Hkv key/value heads, D head_dim,
W window.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field, model_validator

from zoo.components.attention import AttentionConfig, GroupedQueryAttention
from zoo.config import BuildContext
from zoo.cost import Cost

__all__ = ["RollingKVCache", "SlidingWindowAttention", "SlidingWindowConfig", "sliding_window_mask"]


def sliding_window_mask(
    query_index: torch.Tensor, key_index: torch.Tensor, window: int, lookahead: int = 0
) -> torch.Tensor:
    """``(L, S)`` bool, True where the query at sequence index ``q`` may see the key at index ``k``:
    ``k`` is at most ``window - 1`` before ``q`` and at most ``lookahead`` after it (0: causal)."""
    distance = query_index[:, None] - key_index[None, :]  # (L, S)
    return (distance < window) & (distance >= -lookahead)


class RollingKVCache:
    """Keys and values of the last ``window`` positions only, in a ring buffer (Mistral's rolling cache).

    The sequence index ``i`` is kept in slot ``i % capacity``, overwriting the key that just left the
    window, so memory is ``capacity = min(window, max_len)`` slots however long decoding runs. ``update``
    returns the held keys followed by the new ones, with the sequence index of each: the windows of the
    first new queries reach back into the held keys, and the attention masks by index, not by slot: after
    ``update``, ``index`` holds the sequence indices of the keys it returned and ``positions`` their
    positions (zoo's KV-cache interface).

    Args:
        window: keys each query sees (the attention's window).
        max_len: the most positions this cache will see, or None for no limit. Only when it is smaller
            than the window does it bound anything (the buffer, and then the positions accepted).
    """

    def __init__(self, window: int, max_len: int | None = None) -> None:
        if window < 1:
            raise ValueError(f"window ({window}) must be >= 1")
        self.window = window
        self.max_len = max_len
        self.capacity = window if max_len is None else min(window, max_len)
        self.length = 0
        """Positions seen so far (a Python int): the sequence index of the next one."""
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.pos: torch.Tensor | None = None
        """(N, capacity) positions of the held keys, slot by slot (left padding makes them differ from indices)."""
        self.positions: torch.Tensor | None = None
        """(N, S) positions of the keys the last ``update`` returned."""
        self.index: torch.Tensor | None = None
        """(S,) sequence indices of the keys the last ``update`` returned."""

    @property
    def held(self) -> int:
        """How many positions the buffer holds now: the last ``held`` of the ``length`` seen."""
        return min(self.length, self.capacity)

    def held_index(self, device: torch.device | None = None) -> torch.Tensor:
        """``(held,)`` sequence index of the key in each filled slot (slot order, not time order)."""
        slots = torch.arange(self.held, device=device)
        # The newest index i < length with i % capacity == slot.
        return slots + self.capacity * ((self.length - 1 - slots) // self.capacity)

    def update(
        self, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``(N, Hkv, L, D)`` keys and values at ``positions`` (N|1, L; default their indices); return the
        held ones then the new ones, ``(N, Hkv, S, D)`` each, ``S = held + L``; ``index`` and ``positions`` then
        hold their sequence indices ``(S,)`` and positions ``(N, S)``. Only the last ``capacity`` are kept."""
        start, new = self.length, k.size(2)
        end = start + new
        if self.capacity < self.window and end > self.capacity:
            raise ValueError(
                f"rolling cache full: {start} positions cached, {new} more do not fit (max_len {self.max_len})"
            )
        n = k.size(0)
        if self.k is None or self.v is None or self.pos is None:
            _, h, _, d = k.shape
            self.k = k.new_empty(n, h, self.capacity, d)
            self.v = v.new_empty(n, h, self.capacity, v.size(-1))
            self.pos = torch.zeros(n, self.capacity, dtype=torch.long, device=k.device)
        held = self.held
        if positions is None:
            positions = torch.arange(start, end, device=k.device)[None]
        positions = positions.expand(n, -1)  # (N, L)
        self.positions = torch.cat([self.pos[:, :held], positions], dim=1)  # (N, S)
        self.index = index = torch.cat([self.held_index(k.device), torch.arange(start, end, device=k.device)])
        keys = torch.cat([self.k[:, :, :held], k], dim=2)  # (N, Hkv, S, D): a copy, so overwriting is safe
        values = torch.cat([self.v[:, :, :held], v], dim=2)
        kept = min(new, self.capacity)
        slots = index[index.numel() - kept :] % self.capacity
        self.k.index_copy_(2, slots, k[:, :, new - kept :])
        self.v.index_copy_(2, slots, v[:, :, new - kept :])
        self.pos.index_copy_(1, slots, positions[:, new - kept :])
        self.length = end
        return keys, values

    def reset(self) -> None:
        """Forget the cached positions; the buffers are kept for the next sequence."""
        self.length = 0

    @property
    def nbytes(self) -> int:
        """Bytes allocated by the buffers (0 before the first update); independent of ``length``."""
        if self.k is None or self.v is None:
            return 0
        return self.k.nbytes + self.v.nbytes


class SlidingWindowAttention(GroupedQueryAttention):
    """Grouped-query attention over the ``window`` most recent keys (Mistral), with a rolling KV cache.

    zoo's ``GroupedQueryAttention`` with a key mask: the same parameters (``q_proj`` ... ``o_proj``), so
    weights move between the two, and with a window covering the whole sequence the outputs are equal.
    Cross-attention (over an encoder output) has no window and is plain grouped-query attention.

    Args:
        d_model: width E of the input and output.
        window: keys each query sees, itself included (W >= 1).
        **options: those of zoo's ``GroupedQueryAttention`` (num_heads, num_kv_heads, causal, ...).

    Raises:
        ValueError: ``window`` < 1, or the head counts of ``GroupedQueryAttention``.
    """

    def __init__(self, d_model: int, *, window: int, **options: Any) -> None:
        if window < 1:
            raise ValueError(f"window ({window}) must be >= 1")
        super().__init__(d_model, **options)
        self.window = window
        self.lookahead = 0 if self.causal else window - 1  # keys after the query, in a bidirectional stack

    def key_mask(self, query_index: torch.Tensor, key_index: torch.Tensor) -> torch.Tensor:
        return sliding_window_mask(query_index, key_index, self.window, self.lookahead)

    def new_cache(self, batch_size: int, max_len: int) -> Any:
        """A ``RollingKVCache`` of the window (cross-attention: zoo's cache of the encoder K/V)."""
        if self.cross:
            return super().new_cache(batch_size, max_len)
        return RollingKVCache(self.window, max_len)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, window={self.window}"


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

    def cost(self, ctx: BuildContext) -> Cost:
        """Grouped-query attention's cost, with the score term and the KV cache capped at ``window`` keys."""
        return super().cost(ctx).with_(window=self.window)
