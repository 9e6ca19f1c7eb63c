"""Encoder-only model (BERT-like): bidirectional blocks, then a masked-LM, classification or pooler head."""

from __future__ import annotations

import torch

from zoo.components.positional import positions_for

from .blocks import (
    HeadedStack,
    ModelOutput,
    build_mask,
    head_losses,
)


class EncoderModel(HeadedStack):
    """Token ids (N, L) -> per-token logits (MLM), per-sequence logits (classification) or pooled features."""

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> ModelOutput:
        """Shapes: input_ids, attention_mask (1 = real token), token_type_ids: (N, L); labels: (N, L) for
        masked LM (-100 = not predicted) or (N,) for classification."""
        N, L = input_ids.shape
        if positions is None:  # numbered from the ids where the encoding says so (RoBERTa skips padding)
            number = getattr(self.positional, "positions_from_ids", None)
            positions = number(input_ids) if number is not None else None
        if positions is None:
            positions = positions_for(L, device=input_ids.device)
        mask = build_mask(L, attention_mask, causal=False, device=input_ids.device)
        h = self.run(self.embedding(input_ids, token_type_ids), positions=positions, mask=mask)
        logits = self.head(h, mask=attention_mask)
        loss, aux = head_losses(self.head, logits, labels, self._aux_modules)
        return ModelOutput(logits=logits, loss=loss, aux_loss=aux, hidden_states=h)
