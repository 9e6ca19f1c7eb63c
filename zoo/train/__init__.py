"""Training: from a recipe to a trained model, on CPU, one GPU, or many under ``torchrun``.

    from zoo.train import train
    result = train("recipes/gpt-tiny.yaml", out="runs/gpt", **{"train.steps": 200})

The objective follows the architecture (``objectives``), data is embedded unless given (``data``),
checkpoints are atomic and resumable (``checkpoint``), DDP / FSDP2 come from the environment that
``torchrun`` sets (``distributed``), a run may start from imported weights (``transfer``), and ``evaluate``
scores a trained model on a data file (``evaluation``). Importing ``zoo.train`` is cheap: its config is the recipe's
``train:`` section (``zoo.recipe.training``), and torch loads only when something here that needs it is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from zoo.recipe.training import TrainConfig

__all__ = [
    "Evaluation",
    "Run",
    "TrainConfig",
    "TrainEvent",
    "TrainInterrupted",
    "TrainResult",
    "evaluate",
    "load_run",
    "metric_panels",
    "plot_metrics",
    "read_metrics",
    "train",
]

_LAZY = {
    "train": "zoo.train.loop",
    "TrainEvent": "zoo.train.events",
    "TrainResult": "zoo.train.events",
    "TrainInterrupted": "zoo.train.interrupt",
    "evaluate": "zoo.train.evaluation",
    "Evaluation": "zoo.train.evaluation",
    "metric_panels": "zoo.train.metrics",
    "Run": "zoo.train.run",
    "load_run": "zoo.train.run",
    "read_metrics": "zoo.train.metrics",
    "plot_metrics": "zoo.train.metrics",
}

if TYPE_CHECKING:
    from .evaluation import Evaluation, evaluate
    from .events import TrainEvent, TrainResult
    from .interrupt import TrainInterrupted
    from .loop import train
    from .metrics import metric_panels, plot_metrics, read_metrics
    from .run import Run, load_run


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'zoo.train' has no attribute {name!r}")
