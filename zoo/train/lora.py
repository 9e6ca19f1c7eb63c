"""``train.lora`` in a run: the model adapted after its build (and its ``--init-from`` weights), before the optimizer
is made, so only the adapters train and the checkpoints hold them (``zoo.lora`` does the surgery); and
``zoo train --lora rank=16,alpha=32,targets=attention`` read as ``train.lora`` assignments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from torch import nn

from zoo.errors import ArgumentError
from zoo.lora import adapt_as_recipe
from zoo.recipe.training import LoRAConfig


def adapt(model: nn.Module, emit: Callable[..., Any]) -> nn.Module:
    """Adapt ``model`` as its recipe's ``train.lora`` says (nothing when it has none) and return it; the run's
    notice of it goes out as a ``notice`` event through ``emit`` (the trainer's ``_emit``).

    Raises:
        RecipeError: ``train.lora.targets`` selects no linear of this model (the message lists what it has).
    """
    adapted = adapt_as_recipe(model)
    if not adapted:
        return model
    lora = model.recipe.train.lora
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    kinds = ", ".join(dict.fromkeys(name.rpartition(".")[2] for name in adapted))
    message = (
        f"LoRA rank {lora.rank}, alpha {lora.alpha:g} on {len(adapted)} linears ({kinds}): {trained:,} of {total:,} "
        f"parameters train ({trained / total:.2%}), the rest are frozen"
    )
    emit("notice", 0, message=message)
    return model


LORA_KEYS = ("rank", "alpha", "dropout", "targets")


def lora_assignments(spec: str) -> list[str]:
    """``--lora rank=16,alpha=32,targets=q_proj,v_proj`` as ``--set train.lora.KEY=VALUE`` assignments (a name
    without ``=`` after ``targets=`` is one more target)."""
    values: dict[str, list[str]] = {}
    key = None
    for part in (p.strip() for p in spec.split(",")):
        name, sep, value = part.partition("=")
        if sep and name.strip() in LORA_KEYS and name.strip() not in values:
            key = name.strip()
            values[key] = [value.strip()]
        elif not sep and key == "targets" and part:
            values[key].append(part)
        else:
            raise ArgumentError(
                f"--lora {spec!r}: {part!r} is not one of {', '.join(k + '=' for k in LORA_KEYS)} (each once); write "
                "e.g. --lora rank=16,alpha=32,targets=attention"
            )
    _check_lora(spec, values)
    out = [f"train.lora.{k}={v[0]}" for k, v in values.items() if k != "targets"]
    if "targets" in values:
        out.append(f"train.lora.targets=[{', '.join(values['targets'])}]")
    return out or ["train.lora={}"]


def _check_lora(spec: str, values: dict[str, list[str]]) -> None:
    """Refuse a value of ``--lora`` by that flag (rather than by the ``--set`` it becomes)."""
    try:
        LoRAConfig(**{k: v if k == "targets" else v[0] for k, v in values.items()})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "targets"
        raise ArgumentError(f"--lora {spec!r}: {where}: {error['msg']}") from None
