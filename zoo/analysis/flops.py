"""Floating-point operations of a forward pass and of a training step, from the components' declared costs.

Per token, a forward pass costs

    2 · (weight elements multiplied)                  every matmul: one multiply and one add per weight
  + Σ_attention layers 2 · 2 · L · H · D              QK^T and AV against L keys (grows with the length)

with routed layers counting the ``top_k`` experts a token uses, a tied LM head counted (it still multiplies),
and heads that run once per sequence (a classifier on CLS) spread over its L tokens. The attention term uses
the full length L for every query, as a dense kernel computes it (causal kernels can skip about half), or
the window of a sliding-window attention when shorter.
Norms, activations, softmax and embedding lookups are left out: they are a few FLOPs per element, not per
weight. A training step is about 3x the forward (the backward computes gradients of activations and of
weights, each about one forward). For an encoder-decoder, a sequence is a source and a target of L tokens
each, and "per token" means per sequence / L; for a dual-encoder, a text of L tokens and an image, whose tower sees
its own number of tokens (``Part.tokens``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .parts import Part

__all__ = ["TRAIN_FACTOR", "FlopEstimate", "flop_estimate"]

TRAIN_FACTOR = 3
"""A training step (forward + backward) costs about three forward passes."""


@dataclass(frozen=True)
class FlopEstimate:
    seq_len: int
    batch: int
    matmul_per_token: int
    """2 · weights multiplied per token: the part that does not depend on the length."""
    attention_per_token: int
    """2 · 2 · L · H · D summed over attention layers, at ``seq_len``."""
    forward_per_sequence: int

    @property
    def forward_per_token(self) -> int:
        return round(self.forward_per_sequence / self.seq_len)

    @property
    def train_per_token(self) -> int:
        return TRAIN_FACTOR * self.forward_per_token

    @property
    def forward_per_batch(self) -> int:
        return self.batch * self.forward_per_sequence

    @property
    def train_per_sequence(self) -> int:
        return TRAIN_FACTOR * self.forward_per_sequence

    @property
    def train_per_batch(self) -> int:
        return TRAIN_FACTOR * self.forward_per_batch

    def to_dict(self) -> dict[str, int]:
        return {
            "seq_len": self.seq_len,
            "batch": self.batch,
            "forward_per_token": self.forward_per_token,
            "train_per_token": self.train_per_token,
            "matmul_per_token": self.matmul_per_token,
            "attention_per_token": self.attention_per_token,
            "forward_per_sequence": self.forward_per_sequence,
            "train_per_sequence": self.train_per_sequence,
            "forward_per_batch": self.forward_per_batch,
            "train_per_batch": self.train_per_batch,
        }


def flop_estimate(plan: Iterable[Part], *, seq_len: int, batch: int = 1) -> FlopEstimate:
    """FLOPs of the planned model at sequence length ``seq_len`` (components without a formula count 0)."""
    per_token = per_sequence = attention = 0
    for part in plan:
        cost = part.cost
        if cost is None:
            continue
        if part.tokens is not None:  # a tower of its own length (an image's patches): per sequence, at that length
            keys = min(part.tokens, cost.window) if cost.window else part.tokens
            tokens = 1 if cost.per_sequence else part.tokens
            per_sequence += tokens * 2 * cost.matmul + part.tokens * 2 * 2 * keys * cost.score_width
            continue
        if part.context is not None:  # cross-attention over a fixed-length encoder: its keys, projected once each
            per_token += 2 * (cost.matmul - part.context_matmul)
            per_sequence += part.context * 2 * part.context_matmul
            attention += 2 * 2 * part.context * cost.score_width
            continue
        if cost.per_sequence:
            per_sequence += 2 * cost.matmul
        else:
            per_token += 2 * cost.matmul
        keys = min(seq_len, cost.window) if cost.window else seq_len
        attention += 2 * 2 * keys * cost.score_width
    return FlopEstimate(
        seq_len=seq_len,
        batch=batch,
        matmul_per_token=per_token,
        attention_per_token=attention,
        forward_per_sequence=seq_len * (per_token + attention) + per_sequence,
    )
