"""Encoder-decoder model (T5-like): a bidirectional encoder, a causal decoder with cross-attention,
one token embedding shared by both and by the (tied) LM head."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from zoo.components.positional import positions_for

from .blocks import (
    ModelCache,
    ModelOutput,
    Pretrained,
    TransformerStack,
    build_mask,
    collect_aux_losses,
    head_losses,
    tie,
)


def stack_positions(stack: TransformerStack, ids: torch.Tensor, offset: int | torch.Tensor) -> torch.Tensor:
    """The positions of ``ids`` (N, L) that follow ``offset`` earlier (cached) tokens: ``offset .. offset + L - 1``,
    or the numbering the stack's positional encoding takes from the ids (M2M-100 skips padding: a padding token
    at -1, the k-th other token of this call at ``offset + k - 1``, as transformers numbers them when decoding)."""
    number = getattr(stack.positional, "positions_from_ids", None)  # a plugin's encoding may not have it
    positions = number(ids) if number is not None else None
    if positions is None:
        return positions_for(ids.shape[1], offset, ids.device)
    if isinstance(offset, int) and offset == 0:
        return positions
    return torch.where(positions >= 0, positions + offset, positions)


class EncoderDecoderModel(nn.Module, Pretrained):
    """Source ids (N, S) and target ids (N, T) -> next-token logits over the target (N, T, V)."""

    def __init__(
        self,
        *,
        embedding: nn.Module,
        encoder: TransformerStack,
        decoder: TransformerStack,
        head: nn.Module,
        max_len: int,
        decoder_start_token_id: int = 0,
        pad_token_id: int | None = None,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.encoder = encoder
        self.decoder = decoder
        self.head = head
        self.max_len = max_len
        self.decoder_start_token_id = decoder_start_token_id
        self.pad_token_id = decoder_start_token_id if pad_token_id is None else pad_token_id
        tie(head, embedding)
        self._aux_modules = collect_aux_losses(self)

    @property
    def encodes_features(self) -> bool:
        """The encoder embeds features of its own (Whisper's log-mel frames, (N, M, T)), not token ids."""
        return not getattr(getattr(self.encoder, "embedding", None), "token_input", True)

    def tower_tokens(self) -> dict[str, int]:
        """Stacks whose length is fixed, whatever the target's (module prefix -> tokens): an encoder that hears
        audio always takes its whole window of frames (Whisper's 1500), as transformers' Whisper requires."""
        return {"encoder.": self.encoder.embedding.frames} if self.encodes_features else {}

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Source ids (N, S), or the features of an encoder that embeds its own (N, M, T) -> encoder output
        (N, S, E)."""
        return self.encoder.run(**self._encoder_inputs(input_ids, attention_mask))

    def _encoder_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> dict[str, Any]:
        """The encoder stack's arguments for its source: embeddings, positions and mask. An encoder with an
        embedding of its own (``encoder_embedding``) embeds the source itself; features have no padding mask."""
        own = getattr(self.encoder, "embedding", None)
        x = (own if own is not None else self.embedding)(input_ids)
        if self.encodes_features:
            if attention_mask is not None:
                raise ValueError("the encoder embeds features (N, M, T), which take no attention_mask: leave it out")
            return {"x": x, "positions": positions_for(x.shape[1], 0, x.device), "mask": None}
        mask = build_mask(input_ids.shape[1], attention_mask, causal=False, device=input_ids.device)
        return {"x": x, "positions": stack_positions(self.encoder, input_ids, 0), "mask": mask}

    def shift_right(self, labels: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: the decoder sees the start token then the targets, one step behind (an ignored label,
        -100, is seen as the pad token, as transformers' ``shift_tokens_right`` has it)."""
        start = labels.new_full((labels.shape[0], 1), self.decoder_start_token_id)
        shifted = torch.cat([start, labels[:, :-1]], dim=1)
        return shifted.masked_fill(shifted == -100, self.pad_token_id)

    def new_cache(self, batch_size: int, max_len: int | None = None, *, static: bool = False) -> ModelCache:
        """Empty decoder caches (self- and cross-attention) for up to ``max_len`` target tokens; ``static`` as in
        ``DecoderModel.new_cache``."""
        max_len = max_len or self.max_len
        return ModelCache.for_layers(
            self.decoder.new_caches(batch_size, max_len, static),
            self.decoder.new_cross_caches(batch_size, max_len),
            static=static,
            device=next(self.parameters()).device,
        )

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        *,
        attention_mask: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        encoder_hidden: torch.Tensor | None = None,
        cache: ModelCache | None = None,
    ) -> ModelOutput:
        """Shapes: input_ids, attention_mask (N, S); decoder_input_ids (N, T) (default: labels shifted
        right); decoder_attention_mask (N, cached + T); labels (N, T). ``encoder_hidden`` (N, S, E) skips
        the encoder (decoding reuses it)."""
        if encoder_hidden is None:  # the encoder's run, called here: one frame less to every kernel
            encoder_hidden = self.encoder.run(**self._encoder_inputs(input_ids, attention_mask))
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("give decoder_input_ids or labels (the decoder input is labels shifted right)")
            decoder_input_ids = self.shift_right(labels)
        T = decoder_input_ids.shape[1]
        device = decoder_input_ids.device
        offset = cache.length if cache is not None else 0
        mask = build_mask(T, decoder_attention_mask, causal=True, device=device)
        context_mask = build_mask(1, attention_mask, causal=False, device=device)  # (N, 1, 1, S) or None
        h = self.decoder.run(
            self.embedding(decoder_input_ids),
            positions=stack_positions(self.decoder, decoder_input_ids, offset),
            mask=mask,
            caches=cache.layers if cache is not None else None,
            context=encoder_hidden,
            context_mask=context_mask,
            cross_caches=cache.cross if cache is not None else None,
        )
        logits = self.head(h)  # (N, T, V)
        loss, aux = head_losses(self.head, logits, labels, self._aux_modules)
        if cache is not None:
            cache.length += T
        return ModelOutput(
            logits=logits,
            loss=loss,
            aux_loss=aux,
            cache=cache,
            hidden_states=h,
            encoder_hidden=encoder_hidden,
        )
