"""Which keys each query may see: sliding windows and BigBird's block-sparse pattern, as ``(L, S)`` bool masks
(True = may attend) over sequence indices, and Llama 4's chunks over positions. Causality is
``zoo.components.kernels.causal_mask``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch

from zoo.components.kernels import causal_mask

__all__ = [
    "BlockSparse",
    "Chunks",
    "KeyMask",
    "SlidingWindow",
    "block_sparse_mask",
    "causal_mask",
    "chunked_mask",
    "random_block_choice",
    "sliding_window_mask",
]


def sliding_window_mask(
    query_index: torch.Tensor, key_index: torch.Tensor, window: int, lookahead: int = 0
) -> torch.Tensor:
    """``(L, S)`` bool, True where the query at sequence index ``q`` may see the key at index ``k``:
    ``k`` is at most ``window - 1`` before ``q`` and at most ``lookahead`` after it (0: causal).

    Causal, this is Hugging Face's ``sliding_window_overlay`` (``kv_idx > q_idx - sliding_window``), the
    same for Mistral, Mixtral, Qwen2/3, Starcoder2, Gemma 2/3 and Phi-3 in transformers 5.
    """
    distance = query_index[:, None] - key_index[None, :]  # (L, S)
    return (distance < window) & (distance >= -lookahead)


def chunked_mask(query_pos: torch.Tensor, key_pos: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """``(..., L, S)`` bool, True where the query at position ``p`` and the key at position ``k`` share a chunk of
    ``chunk_size`` positions (``p // chunk_size == k // chunk_size``); ``query_pos`` (..., L), ``key_pos`` (..., S).

    Over positions, not sequence indices: a left-padded row's chunks start at its first real token, as
    transformers' ``chunked_overlay`` starts them (``(idx - left_padding) // chunk_size``) for Llama 4."""
    return (query_pos[..., :, None] // chunk_size) == (key_pos[..., None, :] // chunk_size)


def random_block_choice(num_blocks: int, random_blocks: int, seed: int, device=None) -> torch.Tensor:
    """BigBird's random blocks: for each of ``num_blocks`` query blocks, the ``random_blocks`` key blocks it sees
    besides its window and the two global blocks, ``(num_blocks, random_blocks)`` long, -1 where fewer remain.

    The choice is a fixed function of (query block, key block, ``seed``) made of tensor operations (a hash ranks
    the eligible blocks), so every forward of a model sees the same blocks and nothing leaves the graph. The
    global blocks (first and last) choose none: they see every key.
    """
    rows = torch.arange(num_blocks, device=device)[:, None]
    cols = torch.arange(num_blocks, device=device)[None, :]
    mixed = (rows * 1_000_003 + cols * 7_919 + (seed + 1) * 104_729) * 2_654_435_761 % 4_294_967_296
    eligible = ((rows - cols).abs() > 1) & (cols > 0) & (cols < num_blocks - 1)
    eligible &= (rows > 0) & (rows < num_blocks - 1)
    rank = torch.where(eligible, mixed.double(), -1.0)  # (n, n): eligible key blocks ranked by their hash
    k = min(random_blocks, num_blocks)
    score, chosen = rank.topk(k, dim=-1)  # (n, k)
    return torch.where(score >= 0, chosen, -1)


def block_sparse_mask(
    query_index: torch.Tensor, key_index: torch.Tensor, block_size: int, random_blocks: int, seed: int = 0
) -> torch.Tensor | None:
    """``(L, S)`` bool of BigBird's block-sparse attention over ``block_size``-token blocks: a query sees its own
    block and the two beside it, the first and the last block (global: they also see every key), and the
    ``random_blocks`` blocks of :func:`random_block_choice`. None (every key) for sequences of at most
    ``(5 + 2 * random_blocks) * block_size`` keys, which transformers' BigBird attends fully too."""
    length = key_index.numel()
    if length <= (5 + 2 * random_blocks) * block_size:
        return None
    num_blocks = -(-length // block_size)
    q, k = query_index // block_size, key_index // block_size  # (L,), (S,) block of each index
    near = (q[:, None] - k[None, :]).abs() <= 1
    glob = ((q == 0) | (q == num_blocks - 1))[:, None] | ((k == 0) | (k == num_blocks - 1))[None, :]
    chosen = random_block_choice(num_blocks, random_blocks, seed, device=key_index.device)[q]  # (L, r)
    picked = (chosen[:, :, None] == k[None, None, :]).any(1)  # (L, S)
    return near | glob | picked


class KeyMask(Protocol):
    """An attention's pattern of visible keys beyond padding and causality (its mask seam).

    Called with the sequence indices of the queries ``(L,)`` and keys ``(S,)`` and whether the attention is
    causal, it gives ``(L, S)`` bool (True = may attend). ``window`` is the most keys a query sees, which sizes a
    decoding cache (a rolling buffer), or None when a query may see any key. A pattern whose ``by_position`` is
    True (``Chunks``) is called with the positions of the queries ``(N|1, L)`` and keys ``(N|1, S)`` instead, and
    gives ``(N|1, L, S)``."""

    window: int | None

    def __call__(self, query_index: torch.Tensor, key_index: torch.Tensor, causal: bool) -> torch.Tensor: ...


@dataclass(frozen=True)
class SlidingWindow:
    """Each query sees the ``window`` most recent keys, itself included (Mistral); bidirectional, the keys less
    than ``window`` away on either side (ModernBERT's local layers)."""

    window: int

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"window ({self.window}) must be >= 1, or None for no window")

    def __call__(self, query_index: torch.Tensor, key_index: torch.Tensor, causal: bool) -> torch.Tensor:
        return sliding_window_mask(query_index, key_index, self.window, 0 if causal else self.window - 1)


@dataclass(frozen=True)
class BlockSparse:
    """BigBird's block-sparse pattern (:func:`block_sparse_mask`); bidirectional, every key within reach."""

    block_size: int
    random_blocks: int = 0
    seed: int = 0
    window: ClassVar[None] = None

    def __call__(self, query_index: torch.Tensor, key_index: torch.Tensor, causal: bool) -> torch.Tensor | None:
        return block_sparse_mask(query_index, key_index, self.block_size, self.random_blocks, self.seed)


@dataclass(frozen=True)
class Chunks:
    """Chunked local attention (Llama 4's ``attention_chunk_size``): positions fall into chunks of ``chunk_size``,
    and a query sees only the keys of its own chunk (causal: up to itself). Called with positions ``(N|1, L)`` and
    ``(N|1, S)`` (``by_position``), not sequence indices; a query sees at most ``chunk_size`` keys, the most recent
    ones, so a rolling cache of ``window = chunk_size`` keys decodes it::

        chunk_size = 3, causal     keys ->  0 1 2 3 4 5
                                  query 0   x
                                  query 2   x x x
                                  query 3         x
                                  query 5         x x x
    """

    chunk_size: int
    by_position: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size ({self.chunk_size}) must be >= 1, or None for no chunks")

    @property
    def window(self) -> int:
        return self.chunk_size

    def __call__(self, query_pos: torch.Tensor, key_pos: torch.Tensor, causal: bool) -> torch.Tensor:
        return chunked_mask(query_pos, key_pos, self.chunk_size)
