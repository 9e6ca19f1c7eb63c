"""The pieces every architecture shares: the stack, masks, the output object (the block: ``zoo.components.block``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from zoo.checkpoint import Pretrained
from zoo.components.attention import causal_mask
from zoo.components.block import Block

__all__ = [
    "CHECKPOINTING",
    "Block",
    "HeadedStack",
    "ModelCache",
    "ModelOutput",
    "TransformerStack",
    "build_mask",
    "collect_aux_losses",
    "head_losses",
    "set_activation_checkpointing",
    "stacks",
    "tie",
]

CHECKPOINTING = ("none", "every", "every_k", "attention")
"""Activation checkpointing: none; every block; every k-th block (0, k, 2k...); attention only (selective)."""
CHECKPOINT_FLAG = "checkpoint_activations"
"""A block with this attribute True keeps only its input in the forward and recomputes itself in the backward."""


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
    """Decoding state of a whole model: one cache per attention layer plus how many tokens were seen.

    A static cache (``model.new_cache(..., static=True)``) holds ``StaticKVCache`` layers and counts in a 0-d
    tensor that the model advances in place, so a decode step reads no Python int that changes.
    """

    layers: list[Any]
    cross: list[Any] = field(default_factory=list)
    length: Any = 0
    """Tokens seen: an int, or a 0-d long tensor for a static cache."""
    static: bool = False

    @classmethod
    def for_layers(cls, layers: list[Any], cross: list[Any] | None = None, *, static: bool, device: Any) -> ModelCache:
        """A cache over these layer caches; static: its count is a tensor on ``device``."""
        length = torch.zeros((), dtype=torch.long, device=device) if static else 0
        return cls(layers, cross or [], length=length, static=static)

    def reset(self) -> None:
        """Forget every position (a new prompt is coming); buffers are kept."""
        for c in self.layers:
            c.reset()
        if isinstance(self.length, torch.Tensor):
            self.length.zero_()
        else:
            self.length = 0

    def selectable(self) -> bool:
        """Whether every layer's cache can drop batch rows (``select``; a ``StaticKVCache`` cannot)."""
        return all(callable(getattr(c, "select", None)) for c in [*self.layers, *self.cross])

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these batch rows in every layer (sequences that stopped leave the batch)."""
        for c in [*self.layers, *self.cross]:
            c.select(rows)

    def tensors(self) -> list[torch.Tensor]:
        """The tensors a static cache writes in place (a CUDA graph needs their addresses fixed)."""
        held = [self.length] if isinstance(self.length, torch.Tensor) else []
        for c in self.layers:
            c = getattr(c, "attention", c)  # a BlockCache holds the attention's cache
            held += c.tensors() if callable(getattr(c, "tensors", None)) else []
        return held

    @property
    def nbytes(self) -> int:
        return sum(getattr(c, "nbytes", 0) for c in [*self.layers, *self.cross])

    def truncatable(self) -> str | None:
        """None when every layer's cache can drop its last positions (``truncate``), else which cannot and why."""
        for i, c in enumerate(self.layers):
            if not callable(getattr(c, "truncate", None)):
                return (
                    f"layer {i} keeps a {type(c).__name__}, which cannot drop positions (a fixed-size state or window)"
                )
        return None

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` positions of every layer (speculative decoding drops rejected tokens)."""
        why = self.truncatable()
        if why is not None:
            raise ValueError(why)
        for c in self.layers:
            c.truncate(length)
        if isinstance(self.length, torch.Tensor):
            self.length.fill_(length)
        else:
            self.length = length


class TransformerStack(nn.Module):
    """Positional encoding, a list of blocks, and the norms around them. Input and output (N, L, E)."""

    factorized = False
    """The embedding is narrower than the blocks (``embedding.width``): after the positions, the norm and the
    dropout at its width, its ``project`` brings the vectors to d_model (set by ``HeadedStack``)."""

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
        if self.factorized:  # ALBERT, ELECTRA: (N, L, width) -> (N, L, E)
            x = self.embedding.project(x)
        recompute = self.training and torch.is_grad_enabled() and caches is None and cross_caches is None
        for i, block in enumerate(self.blocks):
            kwargs = dict(
                mask=mask,
                positions=positions,
                pos=self.positional,
                cache=caches[i] if caches is not None else None,
                context=context,
                context_mask=context_mask,
                cross_cache=cross_caches[i] if cross_caches is not None else None,
            )
            if recompute and getattr(block, CHECKPOINT_FLAG, False):  # keep only x; recompute in the backward
                x = checkpoint(block, x, use_reentrant=False, **kwargs)
            else:
                x = block(x, **kwargs)
        return self.final_norm(x)

    def new_caches(self, batch_size: int, max_len: int, static: bool = False) -> list[Any]:
        return [block.new_cache(batch_size, max_len, static=static) for block in self.blocks]

    def new_cross_caches(self, batch_size: int, max_len: int) -> list[Any]:
        return [block.cross_attention.new_cache(batch_size, max_len) for block in self.blocks]


class HeadedStack(TransformerStack, Pretrained):
    """A stack between an input embedding and an output head: the single-stack families."""

    def __init__(self, *, embedding: nn.Module, head: nn.Module, max_len: int, **stack: Any) -> None:
        super().__init__(**stack)
        self.embedding = embedding
        self.factorized = getattr(embedding, "project", None) is not None
        self.head = head
        self.max_len = max_len
        tie(head, embedding)
        self._aux_modules = collect_aux_losses(self)


def stacks(model: nn.Module) -> list[nn.Module]:
    """The modules holding ``blocks`` (the model itself, or an encoder-decoder's two stacks)."""
    return [m for m in model.modules() if isinstance(getattr(m, "blocks", None), nn.ModuleList)]


def set_activation_checkpointing(model: nn.Module, mode: str, every: int | None = None) -> int:
    """Recompute activations in the backward instead of keeping them: ``mode`` is one of ``CHECKPOINTING``.

    ``every`` the whole block (only its input is kept), ``every_k`` blocks 0, k, 2k... of each stack,
    ``attention`` the self- and cross-attentions only (their projections, scores and outputs are
    recomputed; the FFN keeps its activations). It applies in training with gradients and no cache, and
    changes no weight or result (dropout is replayed with the same random numbers). Returns the number of
    blocks (or attentions) checkpointed.

    Raises:
        ValueError: an unknown mode, or ``every_k`` without ``every`` >= 1.
    """
    if mode not in CHECKPOINTING:
        raise ValueError(f"activation checkpointing {mode!r}: choose one of {', '.join(CHECKPOINTING)}")
    if mode == "every_k" and (every is None or every < 1):
        raise ValueError(f"activation checkpointing every_k needs every >= 1 (every k-th block), not {every}")
    count = 0
    for stack in stacks(model):
        for i, block in enumerate(stack.blocks):
            whole = mode == "every" or (mode == "every_k" and i % every == 0)
            setattr(block, CHECKPOINT_FLAG, whole)
            count += whole
            for name in ("attention", "cross_attention"):
                sub = getattr(block, name, None)
                if isinstance(sub, nn.Module):
                    count += _checkpoint_forward(sub, mode == "attention")
    return count


class _CheckpointedForward:
    """A module's own ``forward``, run under ``torch.utils.checkpoint`` while training without a cache.

    Set as the instance's ``forward``; it holds the module itself (not a bound method), so a deep copy or a
    pickle of the model checkpoints the copy."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module = self.module
        forward = type(module).forward
        if module.training and torch.is_grad_enabled() and kwargs.get("cache") is None:
            return checkpoint(forward, module, *args, use_reentrant=False, **kwargs)
        return forward(module, *args, **kwargs)


def _checkpoint_forward(module: nn.Module, on: bool) -> bool:
    wrapped = isinstance(module.__dict__.get("forward"), _CheckpointedForward)
    if on and not wrapped:
        module.forward = _CheckpointedForward(module)
    elif not on and wrapped:
        del module.__dict__["forward"]
    return on


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
