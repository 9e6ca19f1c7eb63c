"""``learned``: a trained vector per absolute position added to the input (GPT-2, BERT, OPT, RoBERTa)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from zoo.config import BuildContext
from zoo.cost import Cost
from zoo.limits import MAX_POSITIONS

from .base import PositionalConfig, PositionalEncoding, sinusoid_table


class LearnedEncoding(PositionalEncoding):
    """A learned vector per absolute position added to the input (GPT-2, BERT); ``max_len`` rows, no more.

    With ``offset`` the table has ``max_len + offset`` rows and position ``p`` reads row ``p + offset``
    (OPT: 2; its first two rows are never read). Rows are drawn from N(0, init_std), the recipe's init
    (GPT-2 and BERT: 0.02); nn.Embedding's N(0, 1) would drown the tokens; ``sinusoidal_init`` fills them
    with the sinusoids instead (DistilBERT's ``sinusoidal_pos_embds``), still trainable.

    With ``padding_idx`` positions are numbered as fairseq and RoBERTa number them, from the token ids: the
    k-th token that is not ``padding_idx`` is at position k - 1 (row ``offset + k - 1``), and every padding
    token reads row ``offset - 1`` (RoBERTa: ``offset = padding_idx + 1``, so padding reads row padding_idx).
    """

    def __init__(
        self,
        d_model: int,
        *,
        max_len: int,
        offset: int = 0,
        padding_idx: int | None = None,
        sinusoidal_init: bool = False,
        init_std: float = 0.02,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if padding_idx is not None and offset < 1:
            raise ValueError("padding-aware positions read row offset - 1 for padding: offset must be >= 1")
        self.init_std = init_std
        self.offset = offset
        self.padding_idx = padding_idx
        self.sinusoidal_init = sinusoidal_init
        self.embedding = nn.Embedding(max_len + offset, d_model, device=device, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.sinusoidal_init:
            if not self.embedding.weight.is_meta:
                with torch.no_grad():
                    self.embedding.weight.copy_(sinusoid_table(*self.embedding.weight.shape))
            return
        nn.init.normal_(self.embedding.weight, std=self.init_std)

    def shard_tensor(self, mesh: Any) -> None:
        """Tensor parallelism (``zoo.tensor_parallel``): every rank holds the whole table."""

    def positions_from_ids(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        if self.padding_idx is None:
            return None
        real = input_ids.ne(self.padding_idx).long()
        return real.cumsum(-1) * real - 1  # (N, L): k - 1 for the k-th real token, -1 for padding

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x + self.embedding(positions + self.offset if self.offset else positions)  # (N, L, E)


class LearnedConfig(PositionalConfig):
    bounded_by_max_len: ClassVar[bool] = True

    type: Literal["learned"] = "learned"
    offset: int = Field(
        0, ge=0, le=MAX_POSITIONS, description="Position p reads row p + offset of max_len + offset rows (OPT: 2)."
    )
    padding_idx: int | None = Field(
        None,
        ge=0,
        description="Number positions from the token ids, skipping this id (RoBERTa: 1, with offset 2): padding "
        "reads row offset - 1. Encoders only; default positions 0 .. L-1.",
    )
    sinusoidal_init: bool = Field(
        False, description="Initialise the table with sinusoids instead of N(0, init_std) (DistilBERT)."
    )

    examples: ClassVar[tuple[dict[str, Any], ...]] = (
        {},
        {"offset": 2},
        {"offset": 1, "padding_idx": 0},
        {"sinusoidal_init": True},
    )

    def check(self, ctx: BuildContext) -> list[str]:
        problems = [] if ctx.max_len >= 1 else [f"learned positional encoding needs max_len >= 1, got {ctx.max_len}"]
        if self.padding_idx is not None and self.offset < 1:
            problems.append("padding_idx: padding reads row offset - 1, so offset must be >= 1 (RoBERTa: 2)")
        if self.padding_idx is not None and ctx.causal:
            problems.append(
                "padding_idx: positions numbered from the token ids are an encoder's (architecture: encoder)"
            )
        if self.sinusoidal_init and ctx.d_model % 2:
            problems.append(f"sinusoidal_init needs an even d_model, got {ctx.d_model}")
        return problems

    def cost(self, ctx: BuildContext) -> Cost:
        return Cost(params=(ctx.max_len + self.offset) * ctx.d_model)
