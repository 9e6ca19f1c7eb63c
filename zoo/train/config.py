"""The ``train:`` section of a recipe: ``TrainConfig`` lives in ``zoo.recipe.training``, part of the recipe's schema."""

from __future__ import annotations

from zoo.recipe.training import Checkpointing, LoRAConfig, Objective, Parallel, Precision, Sharding, TrainConfig

__all__ = ["Checkpointing", "LoRAConfig", "Objective", "Parallel", "Precision", "Sharding", "TrainConfig"]
