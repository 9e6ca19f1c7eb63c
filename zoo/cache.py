"""Key/value caches for incremental decoding: one object per attention layer.

A layer creates its own cache with ``attention.new_cache(batch_size, max_len)``; the generator holds
the caches and hands each back to its layer on every step. Caches are for inference (``torch.no_grad``).
``KVCache`` holds every position; ``RollingKVCache`` only the last ``window`` (sliding-window attention);
``CrossKVCache`` the encoder's keys and values. ``StaticKVCache`` holds every position in buffers whose shapes
never change and is written at a tensor position, so a decode step compiles to one graph (``static_cache``
turns a layer's own cache into one).
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

    static = False

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

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these rows (batch indices): sequences that stopped leave the batch."""
        if self.k is not None and self.v is not None and self._positions is not None:
            self.k, self.v = self.k.index_select(0, rows), self.v.index_select(0, rows)
            self._positions = self._positions.index_select(0, rows)

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` positions only (speculative decoding drops the rejected draft tokens)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a KV cache of {self.length} positions to {length}")
        self.length = length

    @property
    def nbytes(self) -> int:
        """Bytes allocated by the buffers (0 before the first update)."""
        if self.k is None or self.v is None:
            return 0
        return self.k.nbytes + self.v.nbytes


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

    static = False

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

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these rows (batch indices): sequences that stopped leave the batch."""
        if self.k is not None and self.v is not None and self.pos is not None:
            self.k, self.v = self.k.index_select(0, rows), self.v.index_select(0, rows)
            self.pos = self.pos.index_select(0, rows)

    @property
    def nbytes(self) -> int:
        """Bytes allocated by the buffers (0 before the first update); independent of ``length``."""
        if self.k is None or self.v is None:
            return 0
        return self.k.nbytes + self.v.nbytes


class StaticKVCache:
    """Keys and values in fixed ``(N, Hkv, max_len, D)`` buffers, written at a tensor position: every decode step
    has the same shapes and reads no Python int that changes, so it compiles to one graph
    (``torch.compile(fullgraph=True)``) and, on CUDA, replays as a CUDA graph.

    ``length`` is a 0-d long tensor, advanced in place by ``update``, which returns the whole buffers.
    ``keys_mask`` then gives the mask over them: a query sees the keys written up to its own index that are
    not padding. The padding of a prompt is taken from the model's mask when the prompt is written (its
    last query row, which a left-padded prompt's last real token fills) and kept for later steps, so a
    decode step needs no mask of its own. Buffers are zeroed when allocated: an unwritten slot is masked
    out, and zeros keep it from turning the masked scores into NaN. A sliding window is its attention's
    ``key_mask`` on this cache (it keeps every position, not a ring of the window).

    Args:
        max_len: the positions the buffers hold.
    """

    static = True
    index = None
    """Keys are ``0 .. max_len - 1`` in order (see ``KVCache.index``)."""

    def __init__(self, max_len: int) -> None:
        if max_len < 1:
            raise ValueError(f"max_len ({max_len}) must be >= 1")
        self.max_len = max_len
        self.length = torch.zeros((), dtype=torch.long)
        """How many positions are written (a 0-d long tensor, on the keys' device after the first update)."""
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self._positions: torch.Tensor | None = None
        self.real: torch.Tensor | None = None
        """(N, max_len) bool: False where the slot holds a padding token."""
        self.slots: torch.Tensor | None = None

    def update(
        self, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``(N, Hkv, L, D)`` keys and values at ``length``; return the whole ``(N, Hkv, max_len, D)`` buffers.

        ``positions`` (N|1, L) are the new keys' positions (default: their slots).
        """
        n, new = k.size(0), k.size(2)
        if self.k is None or self.v is None or self._positions is None or self.slots is None or self.real is None:
            self.k = k.new_zeros(n, k.size(1), self.max_len, k.size(3))
            self.v = v.new_zeros(n, v.size(1), self.max_len, v.size(3))
            self.slots = torch.arange(self.max_len, device=k.device)
            self._positions = self.slots.expand(n, -1).contiguous()
            self.real = torch.ones(n, self.max_len, dtype=torch.bool, device=k.device)
            self.length = self.length.to(k.device)
        if not torch.compiler.is_compiling() and int(self.length) + new > self.max_len:
            raise ValueError(
                f"KV cache full: {int(self.length)} positions cached, {new} more do not fit (max_len {self.max_len})"
            )
        index = self.length + self.slots[:new]  # (L,) the slots written
        self.k.index_copy_(2, index, k)
        self.v.index_copy_(2, index, v)
        if positions is not None:
            self._positions.index_copy_(1, index, positions.expand(n, -1))
        self.length += new
        return self.k, self.v

    def keys_mask(self, mask: torch.Tensor | None, query_len: int) -> torch.Tensor:
        """``(N, 1, L, max_len)`` bool over the keys ``update`` returned, for its last ``query_len`` queries.

        ``mask`` is the model's mask over the keys so far, ``(N|1, 1, L, S)``, or None: its last row gives which
        of the new keys are padding, kept for every later query.
        """
        if self.slots is None or self.real is None:
            raise ValueError("the KV cache is empty: update it first")
        query = self.length - query_len + self.slots[:query_len]  # (L,) sequence indices of the queries
        if mask is not None:
            new = mask[:, 0, -1, mask.size(-1) - query_len :].expand(self.real.size(0), -1)  # (N, L)
            self.real.index_copy_(1, query, new)
        return self.real[:, None, None, :] & (self.slots[None, :] <= query[:, None])  # (N, 1, L, max_len)

    @property
    def positions(self) -> torch.Tensor:
        """(N, max_len) positions of the keys in every slot (their slot numbers where none were written)."""
        if self._positions is None:
            raise ValueError("the KV cache is empty: it has no positions yet")
        return self._positions

    def reset(self) -> None:
        """Forget the cached positions; the buffers are kept for the next sequence."""
        self.length.zero_()
        if self.real is not None:
            self.real.fill_(True)

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` positions only (the later slots are overwritten by the next update)."""
        if not 0 <= length <= int(self.length):
            raise ValueError(f"cannot truncate a KV cache of {int(self.length)} positions to {length}")
        self.length.fill_(length)

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor this cache writes in place (CUDA graphs need their addresses fixed)."""
        held = [self.k, self.v, self._positions, self.real, self.length]
        return [t for t in held if t is not None]

    @property
    def nbytes(self) -> int:
        """Bytes allocated by the key and value buffers (0 before the first update)."""
        if self.k is None or self.v is None:
            return 0
        return self.k.nbytes + self.v.nbytes


def static_cache(cache: object, max_len: int) -> object:
    """A layer's cache as a ``StaticKVCache`` of ``max_len`` positions where it is a ``KVCache`` or a
    ``RollingKVCache``; any other cache (cross-attention, a recurrent state) unchanged."""
    return StaticKVCache(max_len) if isinstance(cache, KVCache | RollingKVCache) else cache


class CrossKVCache:
    """Cross-attention keys and values of the encoder output, computed once and reused every step."""

    static = False

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

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these rows (batch indices): sequences that stopped leave the batch."""
        if self.k is not None and self.v is not None:
            self.k, self.v = self.k.index_select(0, rows), self.v.index_select(0, rows)

    @property
    def nbytes(self) -> int:
        """Bytes held by the stored K/V (0 before the first ``get``)."""
        if self.k is None or self.v is None:
            return 0
        return self.k.nbytes + self.v.nbytes
