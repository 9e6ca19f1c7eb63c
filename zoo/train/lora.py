"""``train.lora`` in a run: the model adapted after its build (and its ``--init-from`` weights), before the optimizer
is made, so only the adapters train and the checkpoints hold them (``zoo.lora`` does the surgery)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from zoo.lora import adapt_as_recipe


def adapt(model: nn.Module, emit: Callable[..., Any] | None = None) -> str | None:
    """Adapt ``model`` as its recipe's ``train.lora`` says; the run's notice of it (None: not adapted), also sent
    as a ``notice`` event through ``emit`` (the trainer's ``_emit``).

    Raises:
        RecipeError: ``train.lora.targets`` selects no linear of this model (the message lists what it has).
    """
    adapted = adapt_as_recipe(model)
    if not adapted:
        return None
    lora = model.recipe.train.lora
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    kinds = ", ".join(dict.fromkeys(name.rpartition(".")[2] for name in adapted))
    message = (
        f"LoRA rank {lora.rank}, alpha {lora.alpha:g} on {len(adapted)} linears ({kinds}): {trained:,} of {total:,} "
        f"parameters train ({trained / total:.2%}), the rest are frozen"
    )
    if emit is not None:
        emit("notice", 0, message=message)
    return message
