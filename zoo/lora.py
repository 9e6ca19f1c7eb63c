"""Low-rank adapters (LoRA) on the linear projections that components declare adaptable.

    model = zoo.build("llama-tiny")
    adapted = apply_lora(model, LoRAConfig(rank=16, alpha=32, targets=["attention"]))   # model surgery
    merge_lora(model)                         # W + (alpha / rank) * B @ A, back to plain nn.Linear layers

A component names its adaptable linears in its own file, as a class attribute mapping each attribute to its kind
(``adaptable = {"q_proj": "attention", ...}``; ``zoo.components.attention.gqa``, ``mla``, ``ffn``). A component
without one is not adapted. ``targets`` selects by kind (``attention``, ``ffn``, ``all``) or by projection name
(``q_proj``); a target that matches nothing is a ``RecipeError`` that lists what the model has.

The surgery happens after the build, outside the model code: each targeted ``nn.Linear`` is replaced by a
:class:`LoRALinear` that shares its weight and bias (so state-dict names stay those of the plain model, plus
``lora_A`` and ``lora_B`` beside them), and every other parameter is frozen. A model that is not adapted runs
exactly the code it ran before. A model whose recipe has ``train.lora`` is adapted when zoo builds it to train,
to resume or to load a folder (:func:`adapt_as_recipe`), so its saved adapters load back with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .errors import RecipeError
from .recipe.training import LoRAConfig

KINDS = ("attention", "ffn")
"""The kinds of projection a component's ``adaptable`` declares; ``all`` selects both."""


class LoRALinear(nn.Linear):
    """An ``nn.Linear`` plus a low-rank update: ``x W^T + b + (alpha / rank) * dropout(x) A^T B^T``.

    It holds the very weight and bias of the linear it replaces (no copy), ``lora_A`` (rank, in), initialised as
    PEFT does (Kaiming uniform), and ``lora_B`` (out, rank), zero: the adapted model starts equal to the base.
    """

    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float = 0.0) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = base.in_features, base.out_features
        self.register_parameter("weight", base.weight)
        self.register_parameter("bias", base.bias)
        self.__dict__.update({k: v for k, v in vars(base).items() if not k.startswith("_") and k not in vars(self)})
        factory = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.rank, self.alpha = rank, alpha
        self.scaling = alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, self.in_features, **factory))
        self.lora_B = nn.Parameter(torch.zeros(self.out_features, rank, **factory))
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        if not self.lora_A.is_meta:
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

    def reset_parameters(self) -> None:  # nn.Linear's would re-draw the shared base weight
        """Leave the shared base weight alone (``zoo.init`` calls this on modules that own their init)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x, self.weight, self.bias)
        return out + F.linear(F.linear(self.lora_dropout(x), self.lora_A), self.lora_B) * self.scaling

    def delta(self) -> torch.Tensor:
        """``(alpha / rank) * B @ A``, the update of the weight, (out, in), in fp32."""
        return (self.lora_B.float() @ self.lora_A.float()) * self.scaling

    def merged(self) -> nn.Linear:
        """A plain ``nn.Linear`` with ``W + delta`` (and the same bias, and the base's attributes)."""
        linear = nn.Linear(
            self.in_features, self.out_features, bias=self.bias is not None, device="meta", dtype=self.weight.dtype
        )
        with torch.no_grad():
            linear.weight = nn.Parameter((self.weight.float() + self.delta()).to(self.weight.dtype))
            if self.bias is not None:
                linear.bias = nn.Parameter(self.bias.detach().clone())
        linear.weight.requires_grad_(self.weight.requires_grad)
        return self._with_attributes(linear)

    def base(self) -> nn.Linear:
        """A plain ``nn.Linear`` holding the same (unmerged) weight and bias: the model without this adapter."""
        linear = nn.Linear(
            self.in_features, self.out_features, bias=self.bias is not None, device="meta", dtype=self.weight.dtype
        )
        linear.weight, linear.bias = self.weight, self.bias
        return self._with_attributes(linear)

    def _with_attributes(self, linear: nn.Linear) -> nn.Linear:
        skip = {"rank", "alpha", "scaling", "training", "in_features", "out_features"}
        linear.__dict__.update({k: v for k, v in vars(self).items() if not k.startswith("_") and k not in skip})
        linear.train(self.training)
        return linear

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, rank={self.rank}, alpha={self.alpha:g}"


def adaptable_linears(model: nn.Module) -> dict[str, tuple[str, nn.Linear]]:
    """``{module name: (kind, linear)}`` of every linear a component of ``model`` declares adaptable."""
    found: dict[str, tuple[str, nn.Linear]] = {}
    for path, module in model.named_modules():
        declared = getattr(type(module), "adaptable", None)
        if not isinstance(declared, dict):
            continue
        for attribute, kind in declared.items():
            child = getattr(module, attribute, None)
            if isinstance(child, nn.Linear):
                found[f"{path}.{attribute}" if path else attribute] = (kind, child)
    return found


def _describe(available: dict[str, tuple[str, nn.Linear]]) -> str:
    by_kind: dict[str, list[str]] = {}
    for name, (kind, _) in available.items():
        short = name.rpartition(".")[2]
        if short not in by_kind.setdefault(kind, []):
            by_kind[kind].append(short)
    return "; ".join(f"{kind}: {', '.join(names)}" for kind, names in by_kind.items())


def select(model: nn.Module, targets: list[str], *, where: str = "train.lora.targets") -> list[str]:
    """The names of the linears ``targets`` selects (kinds, ``all`` or projection names), in model order.

    Raises:
        RecipeError: a target that matches no adaptable linear (naming what the model has), or a model none of
            whose components declares any.
    """
    available = adaptable_linears(model)
    recipe = getattr(model, "recipe", None)
    source = getattr(recipe, "name", None)
    if not available:
        raise RecipeError(
            [
                (
                    where,
                    "no component of this model declares adaptable linears (attention, ffn): LoRA has nothing to "
                    "adapt; drop train.lora to train every weight",
                )
            ],
            source=source,
        )
    chosen: set[str] = set()
    for target in targets:
        if target == "all":
            hits = set(available)
        elif target in KINDS:
            hits = {n for n, (kind, _) in available.items() if kind == target}
        else:
            hits = {n for n in available if n == target or n.endswith(f".{target}")}
        if not hits:
            raise RecipeError(
                [
                    (
                        where,
                        f"{target!r} matches no adaptable linear of this model; it has {_describe(available)} "
                        "(or all): name one of those",
                    )
                ],
                source=source,
            )
        chosen |= hits
    return [name for name in available if name in chosen]


def _set_child(model: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, attribute = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, attribute, module)


def apply_lora(model: nn.Module, config: Any) -> list[str]:
    """Adapt ``model`` in place: freeze every parameter and replace each selected linear by a ``LoRALinear``.

    ``config`` has ``rank``, ``alpha``, ``dropout`` and ``targets`` (``zoo.recipe.training.LoRAConfig``, which then
    becomes ``model.recipe.train.lora``, so the model saves and loads back with its adapters). The adapters are
    drawn from torch's global generator (seed it for reproducible adapters). Returns the names adapted.

    Raises:
        RecipeError: ``targets`` selects nothing (see :func:`select`), or the model is already adapted.
    """
    if lora_modules(model):
        raise RecipeError([("train.lora", "this model already has LoRA adapters")], source=_source(model))
    names = select(model, list(config.targets))
    for p in model.parameters():
        p.requires_grad_(False)
    available = adaptable_linears(model)
    for name in names:
        _set_child(model, name, LoRALinear(available[name][1], config.rank, config.alpha, config.dropout))
    recipe = getattr(model, "recipe", None)
    if isinstance(config, LoRAConfig) and recipe is not None and recipe.train.lora != config:
        # The recipe says so too, so that zoo.save writes a folder that loads back with the adapters.
        model.recipe = recipe.model_copy(update={"train": recipe.train.model_copy(update={"lora": config})})
    return names


def adapt_as_recipe(model: nn.Module, *, fresh: bool = True) -> list[str]:
    """Adapt ``model`` as its recipe's ``train.lora`` says (nothing when it has none); the names adapted.

    ``fresh=False``: the adapters are about to be loaded, so their initialisation leaves torch's global generator
    as it was (loading a model draws no random numbers)."""
    recipe = getattr(model, "recipe", None)
    config = getattr(getattr(recipe, "train", None), "lora", None)
    if config is None:
        return []
    if fresh:
        return apply_lora(model, config)
    with torch.random.fork_rng(devices=[]):
        return apply_lora(model, config)


def lora_modules(model: nn.Module) -> dict[str, LoRALinear]:
    """``{module name: LoRALinear}`` of an adapted model (empty: not adapted)."""
    return {name: m for name, m in model.named_modules() if isinstance(m, LoRALinear)}


def lora_state(model: nn.Module) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``{module name: (A, B)}``, the adapters of ``model``, detached."""
    return {name: (m.lora_A.detach(), m.lora_B.detach()) for name, m in lora_modules(model).items()}


def _without_lora_recipe(model: nn.Module) -> None:
    recipe = getattr(model, "recipe", None)
    if recipe is not None and getattr(recipe.train, "lora", None) is not None:
        model.recipe = recipe.model_copy(update={"train": recipe.train.model_copy(update={"lora": None})})


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every adapter into its weight (``W + (alpha / rank) * B @ A``, computed in fp32), in place: plain
    ``nn.Linear`` layers again, every parameter trainable, and ``model.recipe`` without ``train.lora`` (so the
    model saves and exports as any other). Returns ``model``."""
    return _unadapted(model, lambda module: module.merged())


def strip_lora(model: nn.Module) -> nn.Module:
    """Remove every adapter, in place, keeping the base weights as they are (unmerged); ``model.recipe`` without
    ``train.lora``. Returns ``model``."""
    return _unadapted(model, lambda module: module.base())


def _unadapted(model: nn.Module, plain: Callable[[Any], nn.Module]) -> nn.Module:
    """Each adapted linear of ``model`` replaced by ``plain(it)``, every parameter trainable again."""
    adapted = lora_modules(model)
    for name, module in adapted.items():
        _set_child(model, name, plain(module))
    if adapted:
        for p in model.parameters():
            p.requires_grad_(True)
    _without_lora_recipe(model)
    return model


def _source(model: nn.Module) -> str | None:
    return getattr(getattr(model, "recipe", None), "name", None)
