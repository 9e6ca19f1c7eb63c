"""The pieces every architecture shares: the stack, masks, the output object (the block: ``zoo.components.block``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import nn

from zoo.checkpoint import Pretrained
from zoo.components.attention import causal_mask
from zoo.components.block import Block

__all__ = [
    "Block",
    "HeadedStack",
    "ModelCache",
    "ModelOutput",
    "TransformerStack",
    "build_mask",
    "collect_aux_losses",
    "head_losses",
    "tie",
]


@dataclass
class ModelOutput:
    """What every zoo model returns. ``loss`` only when labels were given; ``aux_loss`` for MoE models."""

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    aux_loss: torch.Tensor | None = None
    cache: Any = None
    hidden_states: torch.Tensor | None = None
    encoder_hidden: torch.Tensor | None = None

    def __getitem__(self, key: str | int) -> Any:
        """``out["logits"]`` as ``out.logits`` (a field left None is a KeyError, as in transformers), or
        ``out[0]``: the i-th field that is set."""
        if isinstance(key, str):
            if key not in self.keys():
                raise KeyError(f"{key!r}: this output has {', '.join(self.keys())}")
            return getattr(self, key)
        return self.to_tuple()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def keys(self) -> list[str]:
        """The names of the fields that are set (not None), in order."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]

    def to_tuple(self) -> tuple[Any, ...]:
        """The fields that are set, in order: ``logits`` first."""
        return tuple(getattr(self, name) for name in self.keys())


@dataclass
class ModelCache:
    """Decoding state of a whole model: one cache per attention layer plus how many tokens were seen."""

    layers: list[Any]
    cross: list[Any] = field(default_factory=list)
    length: int = 0

    @property
    def nbytes(self) -> int:
        return sum(getattr(c, "nbytes", 0) for c in [*self.layers, *self.cross])


class TransformerStack(nn.Module):
    """Positional encoding, a list of blocks, and the norms around them. Input and output (N, L, E)."""

    def __init__(
        self,
        *,
        positional: nn.Module,
        blocks: list[Block],
        embed_norm: nn.Module,
        final_norm: nn.Module,
        dropout: float = 0.0,
        causal: bool = False,
    ) -> None:
        super().__init__()
        self.causal = causal
        self.positional = positional
        self.embed_norm = embed_norm
        self.embed_dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(blocks)
        self.final_norm = final_norm

    def run(
        self,
        x: torch.Tensor,
        *,
        positions: torch.Tensor,
        mask: torch.Tensor | None = None,
        caches: list[Any] | None = None,
        context: torch.Tensor | None = None,
        context_mask: torch.Tensor | None = None,
        cross_caches: list[Any] | None = None,
    ) -> torch.Tensor:
        """Embedded input (N, L, E) -> hidden states (N, L, E)."""
        x = self.embed_dropout(self.embed_norm(self.positional.embed(x, positions)))
        for i, block in enumerate(self.blocks):
            x = block(
                x,
                mask=mask,
                positions=positions,
                pos=self.positional,
                cache=caches[i] if caches is not None else None,
                context=context,
                context_mask=context_mask,
                cross_cache=cross_caches[i] if cross_caches is not None else None,
            )
        return self.final_norm(x)

    def new_caches(self, batch_size: int, max_len: int) -> list[Any]:
        return [block.attention.new_cache(batch_size, max_len) for block in self.blocks]

    def new_cross_caches(self, batch_size: int, max_len: int) -> list[Any]:
        return [block.cross_attention.new_cache(batch_size, max_len) for block in self.blocks]


class HeadedStack(TransformerStack, Pretrained):
    """A stack between an input embedding and an output head: the single-stack families."""

    def __init__(self, *, embedding: nn.Module, head: nn.Module, max_len: int, **stack: Any) -> None:
        super().__init__(**stack)
        self.embedding = embedding
        self.head = head
        self.max_len = max_len
        tie(head, embedding)
        self._aux_modules = collect_aux_losses(self)


def tie(head: nn.Module, embedding: nn.Module) -> None:
    """Share the embedding's token table as the head's output weight when the head asks for it."""
    if getattr(head, "tie_embeddings", False):
        head.proj.weight = embedding.weight


def build_mask(
    query_len: int,
    key_padding: torch.Tensor | None,
    *,
    causal: bool,
    device: torch.device | None = None,
) -> torch.Tensor | None:
    """Boolean (N|1, 1, L, S) mask, True where a query may attend a key, or None.

    None means "nothing to mask beyond causality", which the attention applies itself (its fast path; with
    a cache, the queries are the last L of the S keys). ``key_padding`` is (N, S) with True on real tokens,
    S counting cached tokens too; causality compares sequence indices, not positions, so left-padded
    prompts stay causal.
    """
    if key_padding is None:
        return None
    key_len = key_padding.shape[-1]
    pad = key_padding.to(device=device, dtype=torch.bool)[:, None, None, :]  # (N, 1, 1, S)
    return pad & causal_mask(query_len, key_len, device) if causal else pad  # (N, 1, L, S)


def collect_aux_losses(model: nn.Module) -> list[nn.Module]:
    """Submodules that record an ``aux_loss`` (MoE routers), found once at build time."""
    return [m for m in model.modules() if hasattr(m, "aux_loss") and m is not model]


def head_losses(
    head: nn.Module, logits: torch.Tensor, labels: torch.Tensor | None, aux_modules: list[nn.Module]
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(loss, aux_loss): the head's loss on ``labels`` plus the summed auxiliary (MoE balancing) losses.

    ``loss`` is what to backpropagate, so it includes ``aux_loss``; it is None without labels.
    """
    aux = sum(m.aux_loss for m in aux_modules) if aux_modules else None
    if labels is None:
        return None, aux
    loss = head.loss(logits, labels)
    return (loss + aux if aux is not None else loss), aux
