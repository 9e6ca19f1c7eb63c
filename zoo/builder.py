"""Recipe -> ``nn.Module``: the only place that consults the registry.

The built model is a plain tree of modules. Which registered component made each module is recorded in
``model.zoo_components`` (module path -> ``Provenance``) for inspection; nothing in any ``forward``
looks at it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .config import BuildContext, ComponentConfig, spec_fields
from .errors import RecipeError
from .init import init_weights
from .plugins import get_registry
from .recipe import Recipe, load_recipe, validate_spec
from .registry import Registry


@dataclass(frozen=True)
class Provenance:
    """Which registered component built a module, from which config, at which place in the model."""

    kind: str
    name: str
    plugin: str
    config: ComponentConfig | None = field(default=None, compare=False, repr=False)
    ctx: BuildContext | None = field(default=None, compare=False, repr=False)
    nested: bool = False
    """Built inside another component (an MoE's expert), whose cost includes it."""


class _Maker:
    """The ``make(kind, config, ctx)`` callback handed to architecture builders."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.made: dict[int, Provenance] = {}

    def __call__(self, kind: str, config: ComponentConfig, ctx: BuildContext, *, nested: bool = False) -> nn.Module:
        component = self.registry.get(kind, config.type)
        specs = spec_fields(component.config)
        kwargs: dict[str, Any] = config.arguments()
        for name, nested_kind in specs.items():
            if kwargs.get(name) is not None:
                kwargs[name] = partial(self._nested, nested_kind, kwargs[name], ctx)
        for key, value in ctx.as_kwargs(component.accepts).items():
            kwargs.setdefault(key, value)
        try:
            module = component.factory(ctx.d_model, **kwargs)
        except (ValueError, TypeError, RuntimeError) as exc:
            raise RecipeError(f"{kind} '{config.type}' (plugin '{component.plugin}') failed to build: {exc}") from exc
        if not isinstance(module, nn.Module):
            raise RecipeError(
                f"{kind} '{config.type}' (plugin '{component.plugin}'): its factory returned "
                f"{type(module).__name__}, not a torch.nn.Module"
            )
        self.made[id(module)] = Provenance(kind, config.type, component.plugin, config, ctx, nested)
        return module

    def _nested(self, kind: str, spec: Mapping[str, Any], ctx: BuildContext, width: int | None = None) -> nn.Module:
        """Build a nested spec (``Spec(kind)`` field) at the parent's width, or at ``width``."""
        errors: list[tuple[str, str]] = []
        config = validate_spec(self.registry, kind, spec, kind, errors)
        if config is None:
            raise RecipeError(errors)
        return self(kind, config, ctx if width is None else replace(ctx, d_model=width), nested=True)


_INITIALISERS = frozenset(
    [getattr(nn.init, name) for name in dir(nn.init) if name.endswith("_") and not name.startswith("_")]
    + [
        getattr(torch.Tensor, n)
        for n in ("normal_", "uniform_", "random_", "exponential_", "bernoulli_", "fill_", "zero_")
    ]
)


class _SkipInitOnMeta(TorchFunctionMode):
    """Weight initialisers leave meta tensors alone: they have no values to set.

    Left alone, torch runs them on meta tensors through Python reference code that imports
    ``torch._dynamo`` first, seconds of start-up spent on nothing.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _INITIALISERS:
            target = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
            if isinstance(target, torch.Tensor) and target.is_meta:
                return target
        return func(*args, **kwargs)


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype | None) -> Iterator[None]:
    if dtype is None:
        yield
        return
    if not dtype.is_floating_point:
        raise RecipeError(f"dtype must be a floating-point type, not {dtype}")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def parse_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    from zoo.dtypes import UnknownDtypeError
    from zoo.dtypes import parse_dtype as parse_name

    try:
        return parse_name(dtype)
    except UnknownDtypeError as exc:  # "unknown dtype 'x'; choose one of: float32, bfloat16, float16, float64"
        raise RecipeError(str(exc)) from None


def count_parameters(model: nn.Module) -> int:
    """Parameters counted once each (a tied embedding and LM head share one tensor)."""
    return sum(p.numel() for p in model.parameters())


def build(
    recipe: str | Path | Mapping[str, Any] | Recipe,
    *,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    **overrides: Any,
) -> nn.Module:
    """Build the model a recipe describes: a path, a recipe name, a dict or a ``Recipe``.

    ``device="meta"`` builds the structure without allocating weights (for sizing huge recipes).
    ``overrides`` use dotted or double-underscore keys (``attention__num_heads=4``).
    """
    if not isinstance(recipe, Recipe) or overrides:
        recipe = load_recipe(recipe, **overrides)
    torch_dtype = parse_dtype(dtype)
    registry = get_registry()
    maker = _Maker(registry)
    architecture = registry.get("architecture", recipe.architecture)
    device = torch.device(device) if device is not None else torch.device("cpu")
    skip_init = _SkipInitOnMeta() if device.type == "meta" else contextlib.nullcontext()
    with device, _default_dtype(torch_dtype), skip_init:
        model = architecture.factory(recipe, maker)
    maker.made[id(model)] = Provenance("architecture", recipe.architecture, architecture.plugin)
    model.recipe = recipe
    model.zoo_components = {path: maker.made[id(m)] for path, m in model.named_modules() if id(m) in maker.made}
    if device.type != "meta":
        init_weights(model, set(model.zoo_components), std=recipe.init_std, num_layers=recipe.num_layers)
    if recipe.expect is not None and recipe.expect.parameters is not None:
        actual = count_parameters(model)
        if actual != recipe.expect.parameters:
            raise RecipeError(
                [
                    (
                        "expect.parameters",
                        f"the recipe expects {recipe.expect.parameters:,} parameters but the built "
                        f"model has {actual:,} (difference {actual - recipe.expect.parameters:+,})",
                    )
                ],
                source=recipe.name,
            )
    return model
