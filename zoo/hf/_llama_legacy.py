"""What is left of the hand-written Llama translation: the token embedding of families not yet written as tables
(OPT, Phi, StableLM). This file goes when the last of them stops importing it.
"""

from __future__ import annotations

from typing import Any


def token_embedding(config: dict[str, Any]) -> dict[str, Any]:
    """The token embedding spec: ``nn.Embedding(vocab_size, hidden_size, padding_idx=pad_token_id)`` as HF has it."""
    pad = config["pad_token_id"]
    embedding: dict[str, Any] = {"type": "token"}
    if pad is not None and 0 <= pad < config["vocab_size"]:
        embedding["padding_idx"] = pad
    return embedding
