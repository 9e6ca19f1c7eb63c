"""Decoder-only language model (GPT-like): causal self-attention blocks and an LM head."""

from __future__ import annotations

import torch

from zoo.components.positional import positions_for

from .blocks import (
    HeadedStack,
    ModelCache,
    ModelOutput,
    build_mask,
    head_losses,
)


class DecoderModel(HeadedStack):
    """Token ids (N, L) -> next-token logits (N, L, V), with an optional KV cache for decoding."""

    def new_cache(self, batch_size: int, max_len: int | None = None, *, static: bool = False) -> ModelCache:
        """Empty per-layer caches for decoding up to ``max_len`` tokens (default: the model's); ``static``: fixed
        shapes written at a tensor position, which a compiled decode step needs (``zoo.cache.StaticKVCache``)."""
        max_len = max_len or self.max_len
        device = next(self.parameters()).device
        return ModelCache.for_layers(self.new_caches(batch_size, max_len, static), static=static, device=device)

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        cache: ModelCache | None = None,
        last_only: bool = False,
    ) -> ModelOutput:
        """Shapes: input_ids (N, L); attention_mask (N, S) True/1 on real tokens, S = cached + L;
        positions (N|1, L); labels (N, L) aligned with input_ids (shifted inside), -100 = ignore.
        ``last_only``: the head reads only the last position, logits (N, 1, V) (a prefill that generates
        needs no more: the head of a whole prompt can cost more than its blocks); no labels then."""
        if last_only and labels is not None:
            raise ValueError("last_only computes the logits of the last position only: a loss needs them all")
        N, L = input_ids.shape
        offset = cache.length if cache is not None else 0
        if positions is None:
            positions = positions_for(L, offset, input_ids.device)
        mask = build_mask(L, attention_mask, causal=True, device=input_ids.device)
        h = self.run(self.embedding(input_ids), positions=positions, mask=mask, caches=cache.layers if cache else None)
        real = attention_mask[:, -L:] if attention_mask is not None else None  # (N, L): this call's tokens
        if last_only:
            logits = self.head(h[:, -1:], mask=real[:, -1:] if real is not None else None)  # (N, 1, V)
        else:
            logits = self.head(h, mask=real)  # (N, L, V), or (N, C) for a pooling head
        loss, aux = head_losses(
            self.head, logits[:, :-1], labels[:, 1:] if labels is not None else None, self._aux_modules
        )
        if cache is not None:
            cache.length += L
        return ModelOutput(logits=logits, loss=loss, aux_loss=aux, cache=cache, hidden_states=h)
