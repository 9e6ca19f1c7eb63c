"""Recipe -> ``nn.Module``: the only place that consults the registry.

The built model is a plain tree of modules. Which registered component made each module is recorded in
``model.zoo_components`` (module path -> ``Provenance``) for inspection; nothing in any ``forward``
looks at it.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from .components.kernels import Kernel, make_kernel, set_kernel
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


def _call_factory(what: str, plugin: str, make: Callable[[], Any]) -> nn.Module:
    """``make()``, a registered factory's call: whatever it raises (but an interrupt), or a non-module it returns,
    becomes a ``RecipeError`` naming the component and its plugin."""
    try:
        module = make()
    except RecipeError:
        raise  # a nested component's, which names itself
    except BaseException as exc:  # noqa: BLE001 - whatever a plugin's factory raises is its failure to build
        _not_an_interrupt(exc)
        raise RecipeError(f"{what} (plugin '{plugin}') failed to build: {_raised(exc)}") from exc
    if not isinstance(module, nn.Module):
        raise RecipeError(
            f"{what} (plugin '{plugin}'): its factory returned {type(module).__name__}, not a torch.nn.Module"
        )
    return module


class _Maker:
    """The ``make(kind, config, ctx)`` callback handed to architecture builders."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.made: dict[int, Provenance] = {}
        # Every module made stays referenced until the build ends: a factory may build one and drop it (an MoE
        # reads its experts' shape from one), and a later module must not reuse its id and its provenance.
        self.kept: list[nn.Module] = []

    def __call__(self, kind: str, config: ComponentConfig, ctx: BuildContext, *, nested: bool = False) -> nn.Module:
        component = self.registry.get(kind, config.type)

        def make() -> Any:
            kwargs: dict[str, Any] = config.arguments()
            for name, nested_kind in spec_fields(component.config).items():
                if kwargs.get(name) is not None:
                    kwargs[name] = partial(self._nested, nested_kind, kwargs[name], ctx)
            for key, value in ctx.as_kwargs(component.accepts).items():
                kwargs.setdefault(key, value)
            return component.factory(ctx.d_model, **kwargs)

        module = _call_factory(f"{kind} '{config.type}'", component.plugin, make)
        self.made[id(module)] = Provenance(kind, config.type, component.plugin, config, ctx, nested)
        self.kept.append(module)
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


def parse_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a ``torch.device`` (default the CPU); ``RecipeError`` for a name torch does not know or a
    CUDA device where CUDA is not available."""
    if device is None:
        return torch.device("cpu")
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise RecipeError(f"unknown device {device!r}: {exc}") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise RecipeError(f"device {str(parsed)!r}: CUDA is not available here; use device='cpu' or 'meta'")
    return parsed


def count_parameters(model: nn.Module) -> int:
    """Parameters counted once each (a tied embedding and LM head share one tensor)."""
    return sum(p.numel() for p in model.parameters())


def _not_an_interrupt(exc: BaseException) -> None:
    if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
        raise exc


def _raised(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the model's parameters and buffers (each tensor once), as its dtypes store them."""
    tensors = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def available_memory(device: str | torch.device) -> int | None:
    """Bytes that a model built on ``device`` may take: free CUDA memory (``torch.cuda.mem_get_info``), or for
    the CPU psutil's available memory (else ``MemAvailable`` of ``/proc/meminfo``, and at most what the
    cgroup limit leaves). None when it cannot be known (other devices, other systems)."""
    device = torch.device(device)
    if device.type == "cuda":
        try:
            return int(torch.cuda.mem_get_info(device)[0])
        except Exception:  # noqa: BLE001 - no CUDA, or a device that cannot say: not known
            return None
    if device.type != "cpu":
        return None
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    found: list[int] = []
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as f:
            used = int(f.read().strip())
        if limit.isdigit():
            found.append(max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError  # unreachable


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: a module tree makes no cycles to collect, and with tens of
    thousands of modules (deepseek-v3's 14,848 experts) the collector's passes took half the build time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _assemble(recipe: Recipe, registry: Registry, device: torch.device, dtype: torch.dtype | None) -> nn.Module:
    """The module tree of ``recipe`` on ``device`` (weights not yet initialised), provenance recorded."""
    maker = _Maker(registry)
    architecture = registry.get("architecture", recipe.architecture)
    skip_init = _SkipInitOnMeta() if device.type == "meta" else contextlib.nullcontext()
    with device, _default_dtype(dtype), skip_init, _collector_paused():
        model = _call_factory(
            f"architecture '{recipe.architecture}'", architecture.plugin, lambda: architecture.factory(recipe, maker)
        )
    maker.made[id(model)] = Provenance("architecture", recipe.architecture, architecture.plugin)
    model.recipe = recipe
    model.zoo_components = {path: maker.made[id(m)] for path, m in model.named_modules() if id(m) in maker.made}
    return model


def _check_fits(recipe: Recipe, registry: Registry, device: torch.device, dtype: torch.dtype | None) -> None:
    """Refuse, before allocating anything, a model whose weights need more memory than ``device`` has free."""
    have = available_memory(device)
    if have is None:
        return
    need = weight_bytes(_assemble(recipe, registry, torch.device("meta"), dtype))
    if need > have:
        where = "the CPU" if device.type == "cpu" else str(device)
        raise RecipeError(
            f"the weights of '{recipe.name}' need {_size(need)} but {where} has {_size(have)} available; "
            'build it on the meta device to inspect it without memory (device="meta", --device meta), '
            "or choose a smaller recipe or dtype",
            source=recipe.name,
        )


def check_buildable(recipe: str | os.PathLike | Mapping[str, Any] | Recipe, **overrides: Any) -> Recipe:
    """The validated recipe, after every check that ``build`` makes: validation, then building it on the meta
    device (no memory), so that a factory's refusal or a mismatched ``expect`` is a ``RecipeError`` too.

    ``zoo validate`` calls this: a recipe it accepts, ``zoo build`` builds.
    """
    if not isinstance(recipe, Recipe) or overrides:
        recipe = load_recipe(recipe, **overrides)
    build(recipe, device="meta")
    return recipe


def resolve_kernel(spec: str | Mapping[str, Any] | Kernel) -> Kernel:
    """The attention kernel a name (``"eager"``) or spec (``{"type": "flex_attention"}``) names in the registry;
    a callable is taken as the kernel itself.

    Raises:
        RecipeError: an unknown kernel (with the registered ones) or options its config refuses.
    """
    if callable(spec):
        return spec
    registry = get_registry()
    errors: list[tuple[str, str]] = []
    config = validate_spec(registry, "kernel", spec, "kernel", errors)
    if config is None:
        raise RecipeError(errors)
    return make_kernel(registry.get("kernel", config.type).factory, config)


def build(
    recipe: str | Path | Mapping[str, Any] | Recipe,
    *,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    kernel: str | Mapping[str, Any] | Kernel | None = None,
    **overrides: Any,
) -> nn.Module:
    """Build the model a recipe describes: a path, a recipe name, a dict or a ``Recipe``.

    ``device="meta"`` builds the structure without allocating weights (for sizing huge recipes). On any other
    device, a model whose weights (counted from a meta build) need more memory than the device has available
    is refused before anything is allocated. ``kernel`` names the attention kernel every attention computes
    with (``zoo list kernel``; default ``sdpa``). ``overrides`` use dotted or double-underscore keys
    (``attention__num_heads=4``).
    """
    chosen = resolve_kernel(kernel) if kernel is not None else None
    if not isinstance(recipe, Recipe) or overrides:
        recipe = load_recipe(recipe, **overrides)
    torch_dtype = parse_dtype(dtype)
    registry = get_registry()
    device = parse_device(device)
    if device.type != "meta":
        _check_fits(recipe, registry, device, torch_dtype)
    model = _assemble(recipe, registry, device, torch_dtype)
    if chosen is not None:
        set_kernel(model, chosen)
    if device.type != "meta":
        try:
            init_weights(model, set(model.zoo_components), std=recipe.init_std, num_layers=recipe.num_layers)
        except BaseException as exc:  # noqa: BLE001 - a component's reset_parameters (a plugin's, possibly)
            _not_an_interrupt(exc)
            raise RecipeError(f"initialising the weights of '{recipe.name}' failed: {_raised(exc)}") from exc
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
