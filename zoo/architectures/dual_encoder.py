"""Dual encoder (CLIP): a text tower and an image tower, each a Transformer stack, joined by a contrastive head.

    input_ids (N_t, L)    -> text:   embedding, stack -> head: pool, project --\\
                                                                             cosine × exp(s) -> (N_i, N_t)
    images (N_i, C, H, W) -> vision: embedding, stack -> head: [CLS], project -/

The head that joins the towers may be CLIP's (``contrastive``: [CLS], projections, cos · exp(s)) or SigLIP's
(``siglip``: the text's final position, the image's attention pooling, cos · exp(s) + b, the sigmoid loss).

Either tower runs alone: ``model(input_ids=...)`` gives the text vectors (N_t, P), ``model(images=...)`` the image
vectors (N_i, P), as Hugging Face's ``get_text_features`` and ``get_image_features`` do; with both, ``logits`` holds
every image's similarity with every text (``logits_per_image``), and ``text_embeds`` / ``image_embeds`` the
L2-normalised vectors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from zoo.checkpoint import Pretrained
from zoo.components.positional import positions_for

from .blocks import ModelOutput, TransformerStack, build_mask


@dataclass
class DualEncoderOutput(ModelOutput):
    """``logits``: (N_i, N_t) similarities, or one tower's (N, P) vectors when only its input was given."""

    text_embeds: torch.Tensor | None = None
    """(N_t, P), L2-normalised; set when both inputs were given."""
    image_embeds: torch.Tensor | None = None
    """(N_i, P), L2-normalised; set when both inputs were given."""


class Tower(TransformerStack):
    """One tower: its input embedding (``embedding``), then a Transformer stack."""

    def __init__(self, *, embedding: nn.Module, **stack: Any) -> None:
        super().__init__(**stack)
        self.embedding = embedding


class DualEncoderModel(nn.Module, Pretrained):
    """Token ids and images -> image-text similarity logits (and the contrastive loss with ``return_loss``)."""

    image_towers: tuple[str, ...] = ("vision",)
    """Towers whose input has a fixed number of tokens (an image's patches and [CLS]), whatever the text's length."""

    def __init__(self, *, text: Tower, vision: Tower, head: nn.Module, max_len: int) -> None:
        super().__init__()
        self.text = text
        self.vision = vision
        self.head = head
        self.max_len = max_len

    def encode_text(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Token ids (N, L), attention_mask (N, L; 1 = real token) -> projected text vectors (N, P)."""
        L = input_ids.shape[1]
        mask = build_mask(L, attention_mask, causal=self.text.causal, device=input_ids.device)
        x = self.text.embedding(input_ids)
        h = self.text.run(x, positions=positions_for(L, device=input_ids.device), mask=mask)
        return self.head.text_embeds(h, input_ids, attention_mask)

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """Images (N, C, H, W) -> projected image vectors (N, P)."""
        x = self.vision.embedding(images)
        h = self.vision.run(x, positions=positions_for(x.shape[1], device=x.device))
        return self.head.image_embeds(h)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        images: torch.Tensor | None = None,
        *,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        return_loss: bool = False,
    ) -> DualEncoderOutput:
        """``return_loss``: the contrastive loss of a batch of pairs (image ``i`` with text ``i``); ``labels`` (N,), the
        class of each pair where pairs of one class are alike, makes them all matches (and implies the loss)."""
        if input_ids is None and images is None:
            raise ValueError("a dual-encoder takes input_ids, images or both")
        text = self.encode_text(input_ids, attention_mask) if input_ids is not None else None
        image = self.encode_image(images) if images is not None else None
        if text is None or image is None:
            return DualEncoderOutput(logits=text if image is None else image)
        logits = self.head(image, text)  # (N_i, N_t)
        loss = self.head.loss(logits, labels) if return_loss or labels is not None else None
        text, image = nn.functional.normalize(text, dim=-1), nn.functional.normalize(image, dim=-1)
        return DualEncoderOutput(logits=logits, loss=loss, text_embeds=text, image_embeds=image)
