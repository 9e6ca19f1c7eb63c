"""Vision Transformer: patch embedding (+ CLS), a pre-norm encoder, and a classifier on the CLS token."""

from __future__ import annotations

import torch

from zoo.components.positional import positions_for

from .blocks import HeadedStack, ModelOutput, head_losses


class VisionTransformer(HeadedStack):
    """Images (N, C, H, W) -> class logits (N, num_classes)."""

    def forward(self, images: torch.Tensor, *, labels: torch.Tensor | None = None) -> ModelOutput:
        x = self.embedding(images)  # (N, 1 + num_patches, E)
        h = self.run(x, positions=positions_for(x.shape[1], device=x.device))
        logits = self.head(h)  # (N, num_classes)
        loss, aux = head_losses(self.head, logits, labels, self._aux_modules)
        return ModelOutput(logits=logits, loss=loss, aux_loss=aux, hidden_states=h)
