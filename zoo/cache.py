"""Key/value caches for incremental decoding: one object per attention layer.

A layer creates its own cache with ``attention.new_cache(batch_size, max_len)``; the generator holds
the caches and hands each back to its layer on every step. Caches are for inference (``torch.no_grad``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class KVCache:
    """Self-attention keys and values of every position decoded so far, in preallocated buffers.

    The ``(N, Hkv, max_len, D)`` buffers are allocated on the first ``update`` from the shape, dtype and
    device of the keys, so whoever creates the cache need not know head counts. Only the K/V heads are
    stored: grouped-query and multi-query attention keep ``num_kv_heads / num_heads`` of MHA's memory.

    Args:
        max_len: the most positions the cache can hold.
    """

    def __init__(self, max_len: int) -> None:
        if max_len < 1:
            raise ValueError(f"max_len ({max_len}) must be >= 1")
        self.max_len = max_len
        self.length = 0
        """How many positions are cached (a Python int)."""
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self._positions: torch.Tensor | None = None

    def update(
        self, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``(N, Hkv, L, D)`` keys and values; return views ``(N, Hkv, S, D)`` of all cached ones.

        ``positions`` (N|1, L) are the new keys' positions; ``positions`` then gives those of every cached key
        (with left padding a key's position is not its index in the cache, and relative biases need it).
        """
        start, new = self.length, k.size(2)
        end = start + new
        if end > self.max_len:
            raise ValueError(f"KV cache full: {start} positions cached, {new} more do not fit (max_len {self.max_len})")
        if self.k is None:
            n, h, _, d = k.shape
            self.k = k.new_empty(n, h, self.max_len, d)
            self.v = v.new_empty(n, h, self.max_len, v.size(-1))
            self._positions = torch.arange(self.max_len, device=k.device).expand(n, -1).contiguous()
        self.k[:, :, start:end] = k
        self.v[:, :, start:end] = v
        if positions is not None:
            self._positions[:, start:end] = positions
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]

    index = None
    """Sequence indices of the keys ``update`` returns, or None: they are keys ``0 .. S-1`` in order. A cache
    that returns its keys in another order (a ring buffer) gives an ``(S,)`` tensor; attention then selects
    those columns of the model's mask and passes them to its ``key_mask``."""

    @property
    def positions(self) -> torch.Tensor:
        """(N, S) positions of the cached keys (their indices where ``update`` was given none)."""
        if self._positions is None:
            raise ValueError("the KV cache is empty: it has no positions yet")
        return self._positions[:, : self.length]

    def reset(self) -> None:
        """Forget the cached positions; the buffers are kept for the next sequence."""
        self.length = 0

    @property
    def nbytes(self) -> int:
        """Bytes allocated by the buffers (0 before the first update)."""
        if self.k is None or self.v is None:
            return 0
        return self.k.nbytes + self.v.nbytes


class CrossKVCache:
    """Cross-attention keys and values of the encoder output, computed once and reused every step."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def get(self, compute: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The stored ``(k, v)``; calls ``compute()`` to produce them the first time only."""
        if self.k is None or self.v is None:
            self.k, self.v = compute()
        return self.k, self.v

    def reset(self) -> None:
        """Forget the stored K/V (a new encoder output is coming)."""
        self.k = self.v = None

    @property
    def nbytes(self) -> int:
        """Bytes held by the stored K/V (0 before the first ``get``)."""
        if self.k is None or self.v is None:
            return 0
        return self.k.nbytes + self.v.nbytes
