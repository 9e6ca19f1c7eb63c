"""What a training run reports as it goes (``TrainEvent``) and what it hands back at the end (``TrainResult``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn


@dataclass
class TrainEvent:
    """What the loop reports. ``kind``: start | resume | step | eval | checkpoint | end | notice.

    ``start`` data includes ``objective``, ``generates`` (the model will generate text), ``seq_len`` (tokens
    per training sequence; None for images) and what one step consumes; ``step`` data is the metrics record
    plus ``unit`` (tokens or samples), ``per_s`` (that unit per second, None before any time passed) and
    ``eta_s``.
    """

    kind: str
    step: int
    total: int
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainResult:
    """How a run ended: where it is, how far it got, its last losses and held-out metrics, and the model."""

    run_dir: Path
    step: int
    train_loss: float | None
    eval: dict[str, float]
    seconds: float
    checkpoint: Path | None
    model: nn.Module
    """The trained model (this process's copy; under FSDP2, its shards)."""
