"""Tensors of shapes and dtypes only, that run as CPU tensors: what the plan traces a training step on.

torch's ``FakeTensorMode`` does this too, but making one imports ``torch._dynamo`` (seconds of start-up,
more than the trace itself) and its dispatch does much the plan does not need. A ``MetaTensor`` is what a
``FakeTensor`` is underneath: a meta tensor (sizes, strides, dtype, a storage of no memory) that says its
device is the CPU and carries the CPU dispatch keys, so CPU autocast and CPU autograd treat it as a CPU
tensor (a plain meta tensor gets no autocast). Its storage is the meta one, so views share it and
``LiveBytes`` counts it as on real tensors.

Inside ``MetaMode`` every operator runs on the meta kernels: on ``MetaTensor`` arguments as they are, a
real tensor argument replaced by a meta one of its shape, and operators that make tensors on the CPU
(``empty``, ``zeros``, ``arange``, ``rand``...) on the meta device; what they return comes back as
``MetaTensor``. Nothing is computed: an operator that needs values (``.item()``, ``nonzero``) fails.

torch also wraps every dispatch mode's ``__torch_dispatch__`` and its meta kernels written in Python in
``torch._disable_dynamo``, which imports ``torch._dynamo`` at the first call. ``dynamo_disabled`` is that
wrapper applied only once ``torch._dynamo`` is loaded (by a ``torch.compile``: before, nothing compiles);
``MetaMode`` gives it to those meta kernels, ``MetaMode`` and ``LiveBytes`` use it themselves.

    with MetaMode():
        x = torch.zeros(8, 64)  # a MetaTensor, no memory
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.nn.functional.linear(x, torch.ones(32, 64))  # bf16
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

__all__ = ["MetaMode", "MetaTensor", "dynamo_disabled"]

CPU = torch.device("cpu")
META = torch.device("meta")
_in_kernel = [False]  # while a meta kernel runs, a MetaTensor's device is meta (what it makes is meta)
_makes_tensors: dict[Any, bool] = {}  # operator -> whether it takes a ``device`` (a factory, ``_to_copy``...)
_deferred: list[bool] = []


def dynamo_disabled(fn: Callable[..., Any], recursive: bool = True) -> Callable[..., Any]:
    """``torch._dynamo.disable(fn)``, applied once ``torch._dynamo`` is loaded: until then nothing compiles.

    torch keeps torch.compile out of every ``TorchDispatchMode``'s ``__torch_dispatch__`` and out of its
    meta kernels written in Python with ``torch._disable_dynamo``, which imports ``torch._dynamo`` at the
    first call: seconds. Modes here set ``_should_skip_dynamo`` False and use this instead.
    """
    disabled: list[Callable[..., Any]] = []

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        if not disabled:
            if "torch._dynamo" not in sys.modules:
                return fn(*args, **kwargs)
            disabled.append(sys.modules["torch._dynamo"].disable(fn, recursive, wrapping=False))
        return disabled[0](*args, **kwargs)

    return inner


def _defer_dynamo_imports() -> None:
    """Give torch's Python meta kernels (``torch._refs``, ``torch._decomp``...) wrapped in
    ``torch._disable_dynamo`` the function that wrapper caches on its first call, as ``dynamo_disabled``:
    the same once ``torch._dynamo`` is loaded, no import before. Where torch's wrapper is not what this
    expects, nothing is changed (the first call imports ``torch._dynamo``, as without this)."""
    if _deferred:
        return
    _deferred.append(True)
    import importlib

    from torch._compile import _disable_dynamo
    from torch._decomp import global_decomposition_table

    code = _disable_dynamo(lambda: None).__code__
    if not {"fn", "recursive"} <= set(code.co_freevars):
        return
    names = ["torch._refs", "torch._refs.nn.functional", "torch._refs.linalg", "torch._refs.special"]
    names += ["torch._decomp.decompositions", "torch._meta_registrations", "torch._prims"]
    found: list[Any] = [f for table in global_decomposition_table.values() for f in table.values()]
    for name in names:
        found += vars(importlib.import_module(name)).values()
    seen: set[int] = set()
    while found:  # functions, and the functions their closures and functools.wraps hold
        obj = found.pop()
        if not callable(obj) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if getattr(obj, "__code__", None) is code:
            cells = dict(zip(code.co_freevars, obj.__closure__ or (), strict=False))
            fn, recursive = cells["fn"].cell_contents, cells["recursive"].cell_contents
            if getattr(fn, "__dynamo_disable", None) is None:
                setattr(fn, "__dynamo_disable", dynamo_disabled(fn, recursive))
        found += [c.cell_contents for c in getattr(obj, "__closure__", None) or () if _is_full(c)]
        found.append(getattr(obj, "__wrapped__", None))


def _is_full(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True


class MetaTensor(torch.Tensor):
    """A meta tensor that reports device cpu and dispatches as a CPU tensor (see the module docstring)."""

    @staticmethod
    def __new__(cls, elem: torch.Tensor, requires_grad: bool = False) -> MetaTensor:
        return torch.Tensor._make_subclass(  # shares elem's storage, as torch's FakeTensor does
            cls, elem, requires_grad, dispatch_device=True, device_for_backend_keys=CPU
        )

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return META if _in_kernel[0] else CPU

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.prim.device.default:
            return META if _in_kernel[0] else CPU
        with MetaMode():  # an operator on MetaTensors outside the mode
            return func(*args, **(kwargs or {}))

    def __repr__(self, **_: Any) -> str:
        return f"MetaTensor({tuple(self.shape)}, dtype={self.dtype})"


def _to_meta(x: Any) -> Any:
    """A meta tensor of a real tensor's sizes, strides and dtype (values are not used)."""
    if isinstance(x, torch.Tensor) and not isinstance(x, MetaTensor) and not x.is_meta:
        return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=META)
    return x


def _has_real(args: Any) -> bool:
    """Whether a tensor that is not a MetaTensor is among ``args`` (or in a list or tuple among them)."""
    for a in args:
        if isinstance(a, (list, tuple)):
            if _has_real(a):
                return True
        elif isinstance(a, torch.Tensor) and not isinstance(a, MetaTensor):
            return True
    return False


def _wrap(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and not isinstance(x, MetaTensor):
        return MetaTensor(x)
    return x


class MetaMode(TorchDispatchMode):
    """Run every operator on the meta kernels, ``MetaTensor`` in and out (see the module docstring)."""

    def __enter__(self) -> MetaMode:
        _defer_dynamo_imports()
        # What the meta kernels import at their first call, imported outside the mode: a tensor a module
        # makes when imported inside it would be a MetaTensor (and counted by a LiveBytes inside it).
        import torch.distributed.tensor  # by a copy into a MetaTensor (C++)
        import torch.fx.experimental.symbolic_shapes  # noqa: F401  by the meta kernels written in Python

        return super().__enter__()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # see dynamo_disabled

    @dynamo_disabled
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.prim.device.default:
            return META if _in_kernel[0] else CPU
        if any(t is not MetaTensor and t is not torch.Tensor and t is not torch.nn.Parameter for t in types):
            return NotImplemented  # another subclass: it runs its own operators, which come back here
        kwargs = dict(kwargs) if kwargs else {}
        makes = _makes_tensors.get(func)
        if makes is None:
            makes = _makes_tensors[func] = any(a.name == "device" and a.kwarg_only for a in func._schema.arguments)
        if makes and (kwargs.get("device") is None or torch.device(kwargs["device"]).type == "cpu"):
            kwargs["device"] = META
        if _has_real(args) or _has_real(kwargs.values()):
            flat, spec = tree_flatten((args, kwargs))
            args, kwargs = tree_unflatten([_to_meta(x) for x in flat], spec)
        before, _in_kernel[0] = _in_kernel[0], True
        try:
            with torch._C._DisableTorchDispatch(), torch._C._PreserveDispatchKeyGuard():
                torch._C._set_meta_in_tls_dispatch_include(True)  # the meta kernel, whatever the keys say
                out = func(*args, **kwargs)
                if isinstance(out, torch.Tensor):
                    return _wrap(out)
                if type(out) in (tuple, list) and not any(isinstance(x, (tuple, list, dict)) for x in out):
                    return type(out)(_wrap(x) for x in out)
                flat, spec = tree_flatten(out)
                return tree_unflatten([_wrap(x) for x in flat], spec)
        finally:
            _in_kernel[0] = before
