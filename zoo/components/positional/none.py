"""``none``: no positional encoding; order is known only through the causal mask, if any."""

from __future__ import annotations

from typing import ClassVar, Literal

from .base import PositionalConfig, PositionalEncoding


class NoPositionalEncoding(PositionalEncoding):
    """No positional information at all (order is then known only through the causal mask, if any)."""

    def __init__(self, d_model: int, *, device=None, dtype=None) -> None:
        super().__init__()


class NoPositionalConfig(PositionalConfig):
    type: Literal["none"] = "none"
    style: ClassVar[str] = "none"
